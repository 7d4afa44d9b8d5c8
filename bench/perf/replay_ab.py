"""A search's candidate statements, replayed alternately as written and with a substitution.

    .venv/bin/python -m bench.perf.replay_ab --swap memory_lexical_matches=old_lexical_matches
    .venv/bin/python -m bench.perf.replay_ab --class "vector k-NN" --swap "<text>=<text>" --rounds 2

Captures the text (or vector) statements of ``--searches`` searches of the loaded corpus, as the
search builds them (``inprocess.inprocess_breakdown``), then runs each one and its variant (every
occurrence of ``OLD`` replaced by ``NEW``) one after the other, order reversed every round, each
in a transaction bound to the search's tenant as ``memory_app``. Reports the client-side time
(statement sent to rows loaded) per variant and tenant class, and in how many replays the two
returned the same rows. The objects the variant names (an older function under another name,
say) must already exist in the bench database.

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


def replay(captured: list[dict], *, old: str, new: str, rounds: int) -> dict:
    """Time each captured statement as written ("written") and with ``old`` → ``new`` ("variant")."""
    from django.db import connection

    times: dict[str, list[float]] = defaultdict(list)
    same = 0
    for round_ in range(rounds):
        for cap in captured:
            variants = [("written", cap["sql"]), ("variant", cap["sql"].replace(old, new))]
            if round_ % 2:
                variants.reverse()
            rows = {}
            for name, sql in variants:
                with inprocess.tenant_tx(cap["tenant_id"]), connection.cursor() as cursor:
                    started = time.perf_counter()
                    cursor.execute(sql, cap["params"])
                    rows[name] = cursor.fetchall()
                    elapsed = (time.perf_counter() - started) * 1000
                times[name].append(elapsed)
                times[f"{name} | {cap['size_class']}"].append(elapsed)
            same += rows["written"] == rows["variant"]
    figures = {key: summary(values) for key, values in sorted(times.items())}
    return {"ms": figures, "same_rows": f"{same} of {rounds * len(captured)}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--swap", required=True, help="OLD=NEW: the text to replace in each statement")
    parser.add_argument("--class", dest="statement_class", default="text candidates", help="or 'vector k-NN'")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=1_000_000, help="corpus size loaded")
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
    print(json.dumps(replay(captured, old=old, new=new, rounds=args.rounds), indent=1))


if __name__ == "__main__":
    main()
