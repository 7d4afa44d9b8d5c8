"""A search's candidate statements, replayed alternately as written and with a substitution.

    .venv/bin/python -m bench.perf.replay_ab --swap memory_lexical_matches=old_lexical_matches
    .venv/bin/python -m bench.perf.replay_ab --class "vector k-NN" --swap "<text>=<text>" --rounds 2
    .venv/bin/python -m bench.perf.replay_ab --swap "memory_lexical_matches(=memory_lexical_matches_0015(" --exact

Captures the text (or vector) statements of ``--searches`` searches of the loaded corpus, as the
search builds them (``inprocess.inprocess_breakdown``), then runs each one and its variant (every
occurrence of ``OLD`` replaced by ``NEW``) one after the other, order reversed every round, each
in a transaction bound to the search's tenant as ``memory_app``. Reports the client-side time
(statement sent to rows loaded) per variant and tenant class, and in how many replays the two
returned the same rows. With ``--exact``, also how many of each one's best 1 / 10 / 50 full-text
candidates are the exact ones: those of the statement as written with ``memory_lexical_matches``
asked for every match (no ``max_rows``: each scored), by tenant class. The objects the variant
names (an older function under another name, say) must already exist in the bench database.

Alternating statement by statement is what this shared machine allows: its speed drifts by the
minute, so figures from separate runs do not compare (bench/perf/analysis.md).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

from bench._stats import summary
from bench.perf import corpus, inprocess, measure, stack

# The text statement asks memory_lexical_matches for its best rows; the exact reference asks for all.
_BEST_ROWS = "to_tsquery('simple', %s), %s)"
_ALL_ROWS = "to_tsquery('simple', %s), NULL::integer + %s)"


def _lexical_ids(rows: list) -> list[str]:
    """The full-text candidates of a text statement's rows (score, then id, as the search orders)."""
    scored = sorted((-row[1], str(row[4])) for row in rows if row[1] is not None)
    return [memory_id for _score, memory_id in scored]


def _run(cap: dict, sql: str) -> tuple[list, float]:
    from django.db import connection

    with inprocess.tenant_tx(cap["tenant_id"]), connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute(sql, cap["params"])
        rows = cursor.fetchall()
        return rows, (time.perf_counter() - started) * 1000


def replay(captured: list[dict], *, old: str, new: str, rounds: int, exact: bool = False) -> dict:
    """Time each captured statement as written ("written") and with ``old`` → ``new`` ("variant");
    with ``exact``, their agreement with the exact full-text candidates (first round)."""
    times: dict[str, list[float]] = defaultdict(list)
    agreement: dict[str, list[float]] = defaultdict(list)
    same = 0
    for round_ in range(rounds):
        for cap in captured:
            variants = [("written", cap["sql"]), ("variant", cap["sql"].replace(old, new))]
            if round_ % 2:
                variants.reverse()
            rows = {}
            for name, sql in variants:
                rows[name], elapsed = _run(cap, sql)
                times[name].append(elapsed)
                times[f"{name} | {cap['size_class']}"].append(elapsed)
            same += rows["written"] == rows["variant"]
            if exact and round_ == 0:
                if _BEST_ROWS not in cap["sql"]:
                    raise SystemExit("--exact: the captured statement does not ask memory_lexical_matches as expected")
                reference = _lexical_ids(_run(cap, cap["sql"].replace(_BEST_ROWS, _ALL_ROWS))[0])
                for name in ("written", "variant"):
                    found = _lexical_ids(rows[name])
                    for k in (1, 10, 50):
                        if reference[:k]:
                            share = len(set(reference[:k]) & set(found[:k])) / len(reference[:k])
                            agreement[f"{name} top {k} | {cap['size_class']}"].append(share)
    figures = {key: summary(values) for key, values in sorted(times.items())}
    out = {"ms": figures, "same_rows": f"{same} of {rounds * len(captured)}"}
    if exact:
        out["exact_share"] = {key: [round(sum(v) / len(v), 3), len(v)] for key, v in sorted(agreement.items())}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--swap", required=True, help="OLD=NEW: the text to replace in each statement")
    parser.add_argument("--class", dest="statement_class", default="text candidates", help="or 'vector k-NN'")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
    parser.add_argument("--exact", action="store_true", help="agreement with the exact full-text candidates")
    args = parser.parse_args()
    old, _, new = args.swap.partition("=")
    stack.start_database()
    stack.setup_django()
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    items = measure.workload(corpus.tenant_specs(), tenants, args.size, args.searches, seed=4242)
    captured = inprocess.inprocess_breakdown(items, max_seconds=900)["captured"]
    captured = [cap for cap in captured if cap["class"] == args.statement_class]
    if not any(old in cap["sql"] for cap in captured):
        raise SystemExit(f"no captured {args.statement_class!r} statement contains {old!r}")
    print(json.dumps(replay(captured, old=old, new=new, rounds=args.rounds, exact=args.exact), indent=1))


if __name__ == "__main__":
    main()
