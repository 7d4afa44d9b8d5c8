"""The labelled sets of bench/datasets/, loaded through the service's write path, and their scoring:
recall@k, MRR and the superseded-decision checks per question, bootstrap intervals, the tables."""

import json
import random
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

DATASETS = Path(__file__).resolve().parent / "datasets"
KS = (1, 5, 10)
TOP = 10
RESAMPLES = 2000


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


def pseudonym_tenant(slug: str):
    """A new tenant ``slug`` that masks with pseudonyms (a key made for the run when the deployment
    has none), and an operator principal of it: (tenant, principal)."""
    import os

    from django.conf import settings

    from tenants.access import Principal
    from tenants.masking import tenant_pii_policy_set
    from tenants.services import tenant_create

    if not settings.PII_PSEUDONYM_KEYS:
        settings.PII_PSEUDONYM_KEYS = "1:" + os.urandom(16).hex()
    tenant = tenant_pii_policy_set(tenant=tenant_create(slug=slug), mode="pseudonym")
    return tenant, Principal.operator(tenant=tenant, actor="system:bench")


def _utc(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _store(principal, items: list[dict], request_size: int = 500) -> dict:
    """external id → memory id of ``items`` (``memory_create`` arguments), written as a bulk request
    writes them (``memory_create_many``), ``request_size`` at a time."""
    from memory_service.exceptions import ApplicationError
    from memory_service.memories.services import memory_create_many
    from tenants.context import tenant_context

    ids = {}
    for start in range(0, len(items), request_size):
        chunk = items[start : start + request_size]
        with tenant_context(principal.tenant_id):
            results = memory_create_many(principal=principal, items=chunk)
        for item, result in zip(chunk, results, strict=True):
            if isinstance(result, ApplicationError):
                raise result
            ids[item["external_id"]] = result.memory.id
    return ids


def load_life_chats(
    principal,
    conversations: list[str] | None = None,
    *,
    neighbours: bool = False,
    request_size: int = 500,
    session_time: bool = False,
    form: str = "{speaker}: {text}",
    store=None,
) -> list[Question]:
    """The life chats' questions, each turn stored as one user-scope memory "<speaker>: <text>" said
    a minute after the turn before it from its session's start, ``request_size`` turns a bulk
    request; ``session_time``: every turn at its session's start instead, as an importer that knows
    only the session's date writes them; ``neighbours``: each memory's text also holds the turns
    before and after it in its session (a study of indexing a turn with its context,
    ``bench/neighbour_context.py``); ``form``: how a turn's text is written, from its ``speaker``,
    ``text`` and session's ``date`` (YYYY-MM-DD); ``store``: how the items are written, as
    ``_store`` takes them (``_store``, in process, when None)."""
    store = store or _store
    questions = []
    paths = sorted((DATASETS / "life_chats").glob("c*.json"))
    for path in [p for p in paths if not conversations or p.stem in conversations]:
        data = json.loads(path.read_text(encoding="utf-8"))
        items = []
        for session in data["sessions"]:
            start = _utc(session["date"])
            day = start.date().isoformat()
            lines = [form.format(speaker=turn["speaker"], text=turn["text"], date=day) for turn in session["turns"]]
            for index, turn in enumerate(session["turns"]):
                window = lines[max(index - 1, 0) : index + 2] if neighbours else [lines[index]]
                items.append(
                    {
                        "external_id": turn["id"],
                        "text": "\n".join(window),
                        "scope": "user",
                        "user": data["conversation"],
                        "kind": "note",
                        "occurred_at": start + timedelta(minutes=0 if session_time else index),
                    }
                )
        ids = store(principal, items, request_size)
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


def load_bilingual(by_repository, whole_set, store=None) -> list[Question]:
    """Questions of the bilingual set: ``by_repository`` holds each note in its repository's scope,
    ``whole_set`` all of them in the scope of user "all" (for questions that name no repository);
    ``store``: how the items are written, as ``_store`` takes them (``_store`` when None)."""
    store = store or _store
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
        ids = store(principal, [i for i in items if not notes[i["external_id"]].get("supersedes")], 500)
        # Replacements after what they replace (ids follow occurred_at), with their links.
        for item in items:
            note = notes[item["external_id"]]
            if note.get("supersedes"):
                links = [{"id": str(ids[old]), "partial": bool(note.get("partial"))} for old in note["supersedes"]]
                ids |= store(principal, [item | {"supersedes": links}], 500)
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
