"""What ``bench/ranking_variants.py`` patches into the service's search, one builder per study.

Each returns a replacement of one of ``memory_service.retrieval.search``'s functions (or a set of
them) that behaves as the service's but for the one change a study measures.
"""

from contextlib import contextmanager
from types import SimpleNamespace


@contextmanager
def patched(module, **values):
    """``module``'s attributes set to ``values`` within the block, restored after."""
    before = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(module, name, value)


# Each candidate's thread: the first turn reached by walking its links up.
_FIRST_TURN_SQL = """
    WITH RECURSIVE up (start, id, previous) AS (
        SELECT m.id, m.id, m.thread_previous_id FROM memories_memory m WHERE m.id = ANY(%s)
        UNION ALL
        SELECT up.start, m.id, m.thread_previous_id FROM up JOIN memories_memory m ON m.id = up.previous
    )
    SELECT start, id FROM up WHERE previous IS NULL"""


def lent_both_ways(before_share: float, after_share: float, two_away: float):
    """An ``add_thread_neighbours`` that lends ``before_share`` of a turn's predecessor's fused
    score to it, ``after_share`` of its successor's, and ``two_away`` times those of the turns two
    away; candidates only, as the service's."""

    def add(scores: dict, facts: dict, share: float, fetched=frozenset()) -> dict:
        if not share:
            return scores
        boosted = dict(scores)
        for memory_id, fact in facts.items():
            before = fact.follows
            if memory_id not in scores or before not in scores:
                continue
            boosted[memory_id] += before_share * scores[before]
            boosted[before] += after_share * scores[memory_id]
            earlier = facts[before].follows if before in facts else None
            if two_away and earlier in scores:
                boosted[memory_id] += two_away * before_share * scores[earlier]
                boosted[earlier] += two_away * after_share * scores[memory_id]
        return boosted

    return add


def diversified(service_add, weight: float, pool: int, model_id: str):
    """An ``add_thread_neighbours`` that, after the service's, re-orders the ``pool`` best by
    maximal marginal relevance: each next pick maximises ``weight`` · its min-max-normalised score
    − (1 − ``weight``) · its highest cosine similarity to those picked before (stored vectors)."""
    import numpy as np
    from django.db import connection

    def add(scores: dict, facts: dict, share: float, fetched=frozenset()) -> dict:
        scores = service_add(scores, facts, share, fetched)
        leaders = sorted(scores, key=lambda i: -scores[i])[:pool]
        if weight >= 1 or len(leaders) < 2:
            return scores
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT memory_id, embedding::text FROM memories_memoryembedding"
                " WHERE memory_id = ANY(%s) AND model = %s",
                [leaders, model_id],
            )
            vectors = {i: np.array(v.strip("[]").split(","), dtype=np.float32) for i, v in cursor.fetchall()}
        leaders = [i for i in leaders if i in vectors]
        fused = np.array([scores[i] for i in leaders])
        fused = (fused - fused.min()) / (fused.max() - fused.min() + 1e-9)
        matrix = np.stack([vectors[i] / np.linalg.norm(vectors[i]) for i in leaders])
        similar = matrix @ matrix.T
        picked: list[int] = []
        left = list(range(len(leaders)))
        while left and len(picked) < 10:
            redundancy = similar[:, picked].max(axis=1) if picked else np.zeros(len(leaders))
            best = max(left, key=lambda j: weight * fused[j] - (1 - weight) * redundancy[j])
            picked.append(best)
            left.remove(best)
        out = dict(scores)
        top = max(scores.values()) + len(picked)
        for place, j in enumerate(picked):
            out[leaders[j]] = top - place
        return out

    return add


def with_the_session(service_add, share: float, how: str):
    """An ``add_thread_neighbours`` that, after the service's, adds to each candidate ``share`` of
    the best ("max") or mean ("mean") fused score of the other candidates of its thread."""
    from django.db import connection

    def add(scores: dict, facts: dict, thread_share: float, fetched=frozenset()) -> dict:
        boosted = service_add(scores, facts, thread_share, fetched)
        with connection.cursor() as cursor:
            cursor.execute(_FIRST_TURN_SQL, [list(scores)])
            first_turn = dict(cursor.fetchall())
        threads: dict = {}
        for memory_id, first in first_turn.items():
            threads.setdefault(first, []).append(memory_id)
        for members in threads.values():
            for memory_id in members:
                others = [scores[other] for other in members if other != memory_id]
                if others:
                    boosted[memory_id] += share * (max(others) if how == "max" else sum(others) / len(others))
        return boosted

    return add


def dense_norms(floor: float):
    """(label, replacement of ``search._min_max`` for the dense similarities) of each normalisation."""

    def from_floor(values: dict) -> dict:
        high = max(values.values())
        return {key: (value - floor) / (high - floor) if high > floor else 1.0 for key, value in values.items()}

    def from_tenth(values: dict) -> dict:
        ordered = sorted(values.values(), reverse=True)
        low, high = ordered[min(9, len(ordered) - 1)], ordered[0]
        return {key: max(value - low, 0.0) / (high - low) if high > low else 1.0 for key, value in values.items()}

    yield "from the model's similarity floor to the best", from_floor
    yield "from the 10th best to the best (clipped at 0)", from_tenth


def scaled_ideal(service_fuse, scale: float):
    """A ``fuse`` that divides BM25 scores by ``scale`` times the query's ideal score."""

    def fuse(**kwargs) -> dict:
        return service_fuse(**{**kwargs, "ideal": kwargs.get("ideal", 0.0) * scale})

    return fuse


def query_forms():
    """(label, ``query_for_embedding`` replacement) of each form of a query's embedding text; each
    applies to Latin-script queries only, after the names are left out, as the service's."""
    import re

    from memory_service.retrieval import lexical, search

    function_words = frozenset(
        ["a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "have", "has",
         "had", "what", "when", "where", "who", "whom", "whose", "which", "why", "how"]
    )  # fmt: skip

    def words_without(words: frozenset):
        def strip(text: str) -> str:
            return " ".join(w for w in re.findall(r"[\w'<>-]+", text) if w.lower() not in words)

        return strip

    forms = {
        "as asked (the service before)": None,
        "without the question's opening": lambda text: search._QUESTION_OPENING.sub("", text).strip(" ?"),
        "without the question's opening and articles (the service)": "service",
        "without function words": words_without(function_words),
        "without English stop words (the full-text stage's list)": words_without(lexical.STOP_WORDS),
    }
    service = search.query_for_embedding
    for label, form in forms.items():
        if form == "service":
            yield label, service
            continue

        def replaced(masked: str, *, as_statement: bool, form=form) -> str:
            asked = service(masked, as_statement=False)
            if form is None or not as_statement or lexical.script_of(asked) != "latin":
                return asked
            return form(asked) or asked

        yield label, replaced


def blended(share: float):
    """Replacements of ``search.query_for_embedding`` and ``search.embed_query_in_background`` that
    embed a Latin-script question both as asked and as the service's statement, and search with
    ``share`` · the question's vector + (1 − ``share``) · the statement's, normalised."""
    import numpy as np

    from memory_service.embeddings import backends
    from memory_service.retrieval import search

    service_form, service_embed = search.query_for_embedding, backends.embed_query_in_background

    def form(masked: str, *, as_statement: bool) -> str:
        statement = service_form(masked, as_statement=as_statement)
        asked = service_form(masked, as_statement=False)
        return f"{asked}\x1f{statement}" if statement != asked else statement

    def embed(backend, text: str):
        if "\x1f" not in text:
            return service_embed(backend, text)

        def both():
            question, statement = backend.embed_passages(text.split("\x1f"))
            mixed = share * question + (1 - share) * statement
            return mixed / np.linalg.norm(mixed)

        return service_embed(SimpleNamespace(embed_query=lambda _text: both()), text)

    return {"query_for_embedding": form, "embed_query_in_background": embed}


def across_scripts(service_fuse, service_gate):
    """Replacements of ``search.fuse`` and ``search.lexical_gate_open`` under which a candidate in the
    other script than the query's (which the full-text stage cannot match) gets max(its lexical
    term, its dense term) as its lexical term, when lexical scores count; the query's script is
    read where the gate reads the query."""
    from dataclasses import replace

    from memory_service.retrieval.lexical import script_of

    asked = {"script": "latin"}

    def gate(*, query: str, **kwargs) -> bool:
        asked["script"] = script_of(query)
        return service_gate(query=query, **kwargs)

    def fuse(**kwargs) -> dict:
        scores = service_fuse(**kwargs)
        ranking = kwargs["ranking"]
        if not kwargs["dense"] or not kwargs["use_lexical"] or not ranking.lexical:
            return scores
        dense_terms = service_fuse(**{**kwargs, "lexical": {}, "ranking": replace(ranking, dense=1.0, lexical=0.0)})
        for memory_id, dense in dense_terms.items():
            if (kwargs["scripts"] or {}).get(memory_id) not in (None, asked["script"]):
                lexical = (scores[memory_id] - ranking.dense * dense) / ranking.lexical
                scores[memory_id] = ranking.dense * dense + ranking.lexical * max(lexical, dense)
        return scores

    return {"fuse": fuse, "lexical_gate_open": gate}


def latin_queries_rescored(memory_search):
    """A ``memory_search`` that re-scores queries in Latin script only, as the service did before
    Japanese queries were re-scored too (a query in CJK script is ranked with ``rescore=0``)."""
    from dataclasses import replace

    from memory_service.retrieval.lexical import script_of
    from memory_service.retrieval.search import RANKING

    def search(*, query, ranking=RANKING, **rest):
        if script_of(query) != "latin":
            ranking = replace(ranking, rescore=0)
        return memory_search(query=query, ranking=ranking, **rest)

    return search


def normalised_at_once(min_max):
    """A ``_min_max_per_script`` that normalises over all candidates at once, whatever their script."""
    return lambda values, scripts: min_max(values)


# A memory's parts for ``sentence_maxima``: its title and each sentence of its text.
_SENTENCE_END = r"(?<=[.!?。！？])\s*|\n"


def sentence_maxima(share: float, service_fuse, service_embed, parts: dict, model_id: str):
    """Replacements of ``search.embed_query_in_background`` and ``search.fuse`` that blend each
    dense candidate's similarity with its best part's: (1 − ``share``) · the whole memory's +
    ``share`` · the highest similarity of the query to the memory's title or to one sentence of its
    text, each embedded alone (without people's names, as memories are) by the model ``model_id``.
    ``parts``: memory id → its parts' vectors, filled on first use and shared between variants."""
    import numpy as np
    import regex
    from django.db import connection

    from memory_service.pii import text_for_embedding

    asked = {}

    def embed(backend, text: str):
        future = service_embed(backend, text)
        if backend.model_id == model_id:  # the active model's query, not a re-scoring model's
            asked["backend"], asked["vector"] = backend, future
        return future

    def vectors_of(ids: list) -> None:
        missing = [i for i in ids if i not in parts]
        if not missing:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, title, text FROM memories_memory WHERE id = ANY(%s)", [missing])
            found = cursor.fetchall()
        pieces, owners = [], []
        for memory_id, title, text in found:
            own = [title] + [s for s in regex.split(_SENTENCE_END, text) if len(s.strip()) > 3]
            own = [piece for piece in (text_for_embedding(p).strip() for p in own if p) if piece]
            for piece in own or [text_for_embedding(text)]:
                pieces.append(piece)
                owners.append(memory_id)
        for memory_id, vector in zip(owners, asked["backend"].embed_passages(pieces), strict=True):
            parts.setdefault(memory_id, []).append(vector)
        for memory_id in {*owners}:
            parts[memory_id] = np.stack(parts[memory_id])

    def fuse(*, dense: dict, **kwargs) -> dict:
        if dense and "vector" in asked:
            query = asked["vector"].result()
            vectors_of(list(dense))
            dense = {i: (1 - share) * s + share * float((parts[i] @ query).max()) for i, s in dense.items()}
        return service_fuse(dense=dense, **kwargs)

    return {"embed_query_in_background": embed, "fuse": fuse}


def with_neighbours_text(which: str, words: int | None = None):
    """A replacement of ``memories.embedding.embedding_document`` whose text also holds the stored
    text of the turn linked before the memory (``which`` "before"), after it ("after") or both
    ("both"), in the conversation's order, each turn's own text as the service stores it; with
    ``words``, only for a memory of at most that many words (split at spaces, the speaker's name
    included); "alone": the memory's own text only (the service before ``embedding.reply_context``).
    The service's context (``answered``) is ignored: the study decides it."""
    from memory_service.memories.models import Memory
    from memory_service.pii import text_for_embedding
    from memory_service.retrieval.lexical import date_terms

    def document(memory, answered: str = "") -> str:
        parts = [memory.text]
        long = words is not None and len(memory.text.split()) > words
        which_here = "alone" if long else which
        if which_here in ("before", "both") and memory.thread_previous_id:
            parts.insert(0, Memory.objects.get(id=memory.thread_previous_id).text)
        if which_here in ("after", "both"):
            parts += Memory.objects.filter(thread_previous_id=memory.id).values_list("text", flat=True)[:1]
        parts = [memory.title, *parts, " ".join(memory.tags), date_terms(memory.occurred_at)]
        return text_for_embedding("\n".join(parts))

    return document
