"""The full-text stage scores Okapi BM25: checked against a reference written here in Python.

The memories are written through the REST API (masking, the search document, the triggers that
keep each owner's counts), then ``memory_lexical_matches`` is read as a search reads it, and each
score is compared with BM25 computed from the same documents: the terms (stems) of
``lexical.lexical_document``, the query's ``lexical.query_terms``, IDF
``ln(1 + (N - n + 0.5) / (n + 0.5))`` over the scope owners' memories only, k1 0.9, b 0.4 (migration 0015).
"""

import math
from collections import Counter

import pytest
from django.db import connection

from memory_service.memories.models import Memory, OwnerLexemeStats, OwnerLexicalStats
from memory_service.retrieval.lexical import lexical_document, lexical_query, query_terms
from tenants.context import tenant_context
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "admin"])

K1, B = 0.9, 0.4

NOTES_U1 = [
    "I went to a pottery class on Saturday and made a lopsided bowl",
    "Really tired today, went to bed early",
    "The pottery studio downtown has a wheel you can rent by the hour, pottery every week now",
    "Went hiking with my brother, really steep trail, really worth it",
    "My brother is moving to a town up north next month",
    "Glazing the bowl took longer than throwing it",
    "Deploys run at noon; the rollback script lives in ops/rollback.sh",
    "接続プールの上限を20に下げたらエラーが止まった",
    "接続エラーは再起動で直らなかった",
    "went went went",
]
NOTES_U2 = [  # another owner of the same tenant: never counted for u1's searches
    "pottery pottery pottery pottery",
    "pottery again",
]
QUERIES = [
    "pottery bowl",
    "went really",
    "brother moving north",
    "rollback script for deploys",
    "接続エラー",
    "What did I make at the pottery class?",
    "2025-03",
]


def reference_bm25(documents: dict, query: str) -> dict:
    """id → BM25 of ``query`` for every document holding one of its terms. ``documents``: id → terms."""
    terms = query_terms(query)
    count = len(documents)
    average = sum(len(d) for d in documents.values()) / count
    holding = Counter(t for d in documents.values() for t in set(d))
    scores = {}
    for memory_id, document in documents.items():
        frequencies = Counter(document)
        score = 0.0
        for term in terms:
            f = frequencies.get(term)
            if not f:
                continue
            idf = math.log(1 + (count - holding[term] + 0.5) / (holding[term] + 0.5))
            score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * len(document) / average))
        if score:
            scores[memory_id] = score
    return scores


def service_rows(tenant, owner_keys: list[str], query: str) -> list[tuple]:
    """Every match of ``query``, as the scan of all matches asks."""
    return best_rows(tenant, owner_keys, query, max_rows=None)


def service_scores(tenant, owner_keys: list[str], query: str) -> dict:
    return {str(memory_id): rank for memory_id, rank, _ideal in service_rows(tenant, owner_keys, query)}


def best_rows(tenant, owner_keys: list[str], query: str, *, max_rows: int | None, bounded: int | None = None) -> list:
    """``memory_lexical_matches`` asked for its best ``max_rows`` as a search asks; with ``bounded``,
    through the bounded path of large scopes (``memory.lexical_bounded``: its target) whatever the
    scope's size."""
    with tenant_context(tenant.id), connection.cursor() as cursor:
        if bounded is not None:
            cursor.execute("SELECT set_config('memory.lexical_bounded', %s, true)", [str(bounded)])
        cursor.execute(
            "SELECT id, rank, ideal FROM memory_lexical_matches(%s::text[], to_tsquery('simple', %s), %s)",
            [owner_keys, lexical_query(query), max_rows],
        )
        return [(str(memory_id), rank, ideal) for memory_id, rank, ideal in cursor.fetchall()]


def reference_ideal(documents: dict, query: str) -> float:
    """The sum of the IDFs of the query's terms that occur in the documents."""
    count = len(documents)
    holding = Counter(t for d in documents.values() for t in set(d))
    return sum(math.log(1 + (count - holding[t] + 0.5) / (holding[t] + 0.5)) for t in query_terms(query) if holding[t])


def documents_of(tenant, *, user: str) -> dict:
    """id → the terms of each stored memory of ``user``'s scope, as the write path indexed them."""
    with tenant_context(tenant.id):
        memories = Memory.objects.for_tenant(tenant).filter(scope="user", user=user)
        return {
            str(m.id): lexical_document(title=m.title, text=m.text, tags=m.tags, occurred_at=m.occurred_at).split()
            for m in memories
        }


@pytest.fixture
def corpus(tenant, api_client):
    for user, notes in (("u1", NOTES_U1), ("u2", NOTES_U2)):
        for index, text in enumerate(notes):
            response = api_client.post(
                "/api/v1/memories",
                {"scope": "user", "user": user, "kind": "note", "text": text, "tags": ["t"] if index % 3 else [],
                 "occurred_at": f"2025-0{1 + index % 4}-1{index % 10}T10:00:00Z"},
                format="json",
            )  # fmt: skip
            assert response.status_code == 201, response.json()
    return tenant


@pytest.mark.parametrize("query", QUERIES)
def test_its_scores_match_reference_bm25_over_the_owners_memories(corpus, query):
    documents = documents_of(corpus, user="u1")
    expected = reference_bm25(documents, query)
    found = service_scores(corpus, ["user:u1"], query)
    assert expected, "every query matches something"
    assert found.keys() == expected.keys()
    for memory_id, score in expected.items():
        assert found[memory_id] == pytest.approx(score, rel=1e-5)
    ideals = {ideal for _id, _rank, ideal in service_rows(corpus, ["user:u1"], query)}
    assert len(ideals) == 1 and ideals.pop() == pytest.approx(reference_ideal(documents, query), rel=1e-5)


def test_rarer_terms_weigh_more_and_longer_notes_less(corpus):
    found = service_scores(corpus, ["user:u1"], "went pottery")
    with tenant_context(corpus.id):
        memories = list(Memory.objects.for_tenant(corpus).filter(user="u1"))
    by_text = {m.text: found[str(m.id)] for m in memories if str(m.id) in found}
    # "went" is in four notes and "pottery" in two: one pottery beats one went.
    assert (
        by_text["I went to a pottery class on Saturday and made a lopsided bowl"]
        > by_text["Really tired today, went to bed early"]
    )
    # Three "went" in a three-word note outscore one "went" in a longer one, but not threefold.
    assert by_text["went went went"] < 3 * by_text["Really tired today, went to bed early"]


def test_two_owners_are_one_corpus(corpus):
    documents = documents_of(corpus, user="u1") | documents_of(corpus, user="u2")
    expected = reference_bm25(documents, "pottery")
    found = service_scores(corpus, ["user:u1", "user:u2"], "pottery")
    assert found.keys() == expected.keys()
    assert all(found[i] == pytest.approx(s, rel=1e-5) for i, s in expected.items())


def test_another_tenants_memories_neither_match_nor_count(corpus, other_tenant, other_token):
    other, client = other_tenant, client_for(other_token)
    for text in [f"pottery bowl {n} pottery bowl" for n in range(3)] + [f"pottery {n}" for n in range(3)]:
        assert client.post("/api/v1/memories", {"scope": "user", "user": "u1", "kind": "note", "text": text},
                           format="json").status_code == 201  # fmt: skip
    expected = reference_bm25(documents_of(corpus, user="u1"), "pottery bowl")
    found = service_scores(corpus, ["user:u1"], "pottery bowl")
    assert found.keys() == expected.keys()
    assert all(found[i] == pytest.approx(s, rel=1e-5) for i, s in expected.items())
    assert len(service_scores(other, ["user:u1"], "pottery bowl")) == 6


def owner_stats(tenant) -> dict:
    with tenant_context(tenant.id):
        return {s.owner_key: (s.documents, s.terms) for s in OwnerLexicalStats.objects.for_tenant(tenant)}


def counted(tenant) -> dict:
    """What the stats rows must say, counted from the memories themselves."""
    totals: dict = {}
    for user in ("u1", "u2"):
        documents = documents_of(tenant, user=user)
        if documents:
            totals[f"user:{user}"] = (len(documents), sum(len(d) for d in documents.values()))
    return totals


def lexeme_stats(tenant) -> dict:
    with tenant_context(tenant.id):
        return {(s.owner_key, s.lexeme): s.documents for s in OwnerLexemeStats.objects.for_tenant(tenant)}


def counted_lexemes(tenant) -> dict:
    """What the lexeme rows must say, counted from the memories' stored documents."""
    with tenant_context(tenant.id), connection.cursor() as cursor:
        cursor.execute(
            "SELECT owner_key, lexeme, count(*) FROM memories_memory,"
            " unnest(tsvector_to_array(search_vector)) AS lexeme GROUP BY 1, 2"
        )
        return {(owner_key, lexeme): documents for owner_key, lexeme, documents in cursor.fetchall()}


def test_the_owner_counts_follow_writes_edits_and_deletions(corpus, api_client, other_token):
    # another tenant's memories of the same owner and words count for that tenant only
    client_for(other_token).post("/api/v1/memories", {"scope": "user", "user": "u1", "kind": "note",
                                                      "text": "pottery bowl pottery"}, format="json")  # fmt: skip
    assert owner_stats(corpus) == counted(corpus)
    assert lexeme_stats(corpus) == counted_lexemes(corpus)
    assert lexeme_stats(corpus)[("user:u1", "potteri")] == 2
    with tenant_context(corpus.id):
        first = Memory.objects.for_tenant(corpus).filter(user="u1").order_by("created_at").first()
        second_owner = list(Memory.objects.for_tenant(corpus).filter(user="u2"))
    response = api_client.patch(
        f"/api/v1/memories/{first.id}", {"text": "a much longer text about pottery and bowls and glaze"}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert owner_stats(corpus) == counted(corpus)
    assert lexeme_stats(corpus) == counted_lexemes(corpus)
    assert lexeme_stats(corpus)[("user:u1", "glaze")] == 2  # one more ("Glazing the bowl…" had one)
    assert ("user:u1", "saturday") not in lexeme_stats(corpus)  # the edited note's only one: gone
    for memory in second_owner:
        assert api_client.delete(f"/api/v1/memories/{memory.id}").status_code == 204
    assert "user:u2" not in owner_stats(corpus)  # the last memory took the row with it
    assert owner_stats(corpus) == counted(corpus)
    assert lexeme_stats(corpus) == counted_lexemes(corpus)
    assert not any(owner_key == "user:u2" for owner_key, _lexeme in lexeme_stats(corpus))  # no zero left behind
    assert reference_bm25(documents_of(corpus, user="u1"), "pottery") == pytest.approx(
        service_scores(corpus, ["user:u1"], "pottery"), rel=1e-5
    )


@pytest.mark.parametrize("bounded", [None, 1000])  # a small scope's path; bounded, with more expected than exist
@pytest.mark.parametrize("query", ["pottery bowl", "went really", "brother moving north"])
def test_the_best_matches_of_a_query_are_its_exact_best(corpus, query, bounded):
    expected = reference_bm25(documents_of(corpus, user="u1"), query)
    best = sorted(expected.items(), key=lambda item: (-item[1], item[0]))[:2]
    found = best_rows(corpus, ["user:u1"], query, max_rows=2, bounded=bounded)
    assert [memory_id for memory_id, _rank, _ideal in found] == [memory_id for memory_id, _score in best]
    assert [rank for _id, rank, _ideal in found] == pytest.approx([score for _id, score in best], rel=1e-5)


@pytest.fixture
def rare_and_common(tenant, api_client):
    """u3's notes: "alpha" in two of them (once in a long note that also says "beta", five times in
    a short one), "beta" in seven."""
    filler = "the meeting notes went on for a long while about nothing in particular " * 3
    texts = [f"alpha beta {filler}", "alpha alpha alpha alpha alpha"] + [f"beta gamma delta {n}" for n in range(6)]
    ids = []
    for text in texts:
        response = api_client.post("/api/v1/memories", {"scope": "user", "user": "u3", "kind": "note", "text": text},
                                   format="json")  # fmt: skip
        assert response.status_code == 201, response.json()
        ids.append(response.json()["id"])
    return tenant, ids


def test_the_bounded_path_reads_the_memories_holding_most_of_the_rare_terms(rare_and_common):
    """Asked for one match with a target of one, the bounded path reads only the memories holding
    both terms and scores them exactly: the long note, although the short one that repeats "alpha"
    scores higher (what a large scope's search may miss). Asked for two, it finds one such memory,
    so it asks again with one term: every match, exact."""
    tenant, (both, repeated, *_rest) = rare_and_common
    documents = documents_of(tenant, user="u3")
    exact = reference_bm25(documents, "alpha beta")
    assert max(exact, key=exact.get) == repeated  # the case this test is about

    found = best_rows(tenant, ["user:u3"], "alpha beta", max_rows=1, bounded=1)
    assert [memory_id for memory_id, _rank, _ideal in found] == [both]
    assert found[0][1] == pytest.approx(exact[both], rel=1e-5)
    assert found[0][2] == pytest.approx(reference_ideal(documents, "alpha beta"), rel=1e-5)
    assert [row[0] for row in best_rows(tenant, ["user:u3"], "alpha beta", max_rows=1)] == [repeated]  # small: exact

    found = best_rows(tenant, ["user:u3"], "alpha beta", max_rows=2, bounded=1)
    best = sorted(exact.items(), key=lambda item: (-item[1], item[0]))[:2]
    assert [(memory_id, rank) for memory_id, rank, _ideal in found] == [
        (memory_id, pytest.approx(score, rel=1e-5)) for memory_id, score in best
    ]


def test_a_words_bigrams_count_as_one_term_when_the_bounded_path_chooses_what_to_read(tenant, api_client):
    """Every memory holding 監査ログ holds its three bigrams, so they have one count. Taken for three
    independent terms they would make "at least m of the rarest terms" look rare enough at m = 3,
    and every memory with the word (100) would be read and scored; taken as one word, m = 5: only
    the 20 memories holding both words are read (migration 0018)."""
    both = [f"監査ログ 不安定 {n}" for n in range(20)]
    texts = both + [f"監査ログ 確認 {n}" for n in range(80)] + [f"weekly deploy note {n}" for n in range(400)]
    items = [{"scope": "user", "user": "u4", "kind": "note", "text": text} for text in texts]
    response = api_client.post("/api/v1/memories/bulk", {"items": items}, format="json")
    assert response.status_code == 200, response.json()
    with tenant_context(tenant.id):
        holding_both = {
            str(i) for i in Memory.objects.for_tenant(tenant).filter(text__in=both).values_list("id", flat=True)
        }
    assert len(holding_both) == 20

    with tenant_context(tenant.id), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memory.lexical_bounded', '6', true)")
        # The rows read through the index are counted as fetched; a scan of this small table would not be.
        cursor.execute("SELECT set_config('enable_seqscan', 'off', true)")
        cursor.execute("SELECT pg_stat_get_xact_tuples_fetched('memories_memory'::regclass)")
        before = cursor.fetchone()[0]
        cursor.execute(
            "SELECT id FROM memory_lexical_matches(%s::text[], to_tsquery('simple', %s), 10)",
            [["user:u4"], lexical_query("監査ログ 不安定")],
        )
        found = {str(memory_id) for (memory_id,) in cursor.fetchall()}
        cursor.execute("SELECT pg_stat_get_xact_tuples_fetched('memories_memory'::regclass)")
        fetched = cursor.fetchone()[0] - before
    assert len(found) == 10 and found <= holding_both
    assert fetched <= 25  # the 20 holding both words (100 when the bigrams counted as three terms)


def test_a_query_of_many_terms_and_a_full_scan_stay_exact(corpus):
    documents = documents_of(corpus, user="u1")
    many = "pottery bowl brother moving north town hiking trail steep glazing"  # more than six terms
    expected = reference_bm25(documents, many)
    found = best_rows(corpus, ["user:u1"], many, max_rows=None, bounded=1)
    assert {memory_id: rank for memory_id, rank, _ideal in found} == pytest.approx(expected, rel=1e-5)
    found = best_rows(corpus, ["user:u1"], many, max_rows=100)
    assert {memory_id: rank for memory_id, rank, _ideal in found} == pytest.approx(expected, rel=1e-5)


def test_a_term_repeated_in_the_query_counts_once(corpus):
    documents = documents_of(corpus, user="u1")
    expected = reference_bm25(documents, "pottery")
    with tenant_context(corpus.id), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memory.lexical_bounded', '100', true)")
        cursor.execute(
            "SELECT id, rank FROM memory_lexical_matches(%s::text[], to_tsquery('simple', %s), 10)",
            [["user:u1"], f"{lexical_query('pottery')} | {lexical_query('pottery')}"],
        )
        found = {str(memory_id): rank for memory_id, rank in cursor.fetchall()}
    assert found == pytest.approx(expected, rel=1e-5)


def test_two_writers_of_one_owner_storing_in_several_statements_wait_instead_of_deadlocking(tenant):
    """A bulk request stores its parts in several statements of one transaction. Two of them for one
    owner wait on the owner's statistics row before any lexeme row: B's first part ("00zero…",
    whose lexeme sorts before the shared date terms) must not hold "00zero" while it waits for A,
    whose second part needs it."""
    import threading

    from django.db import connection, transaction

    from memory_service.memories.services import memory_create
    from tenants.access import Principal
    from tests.conftest import ALL_PERMISSIONS
    from tests.factories import make_token

    token = make_token(tenant, permissions=ALL_PERMISSIONS).token
    a_first_stored, a_may_go_on = threading.Event(), threading.Event()
    b_pid, errors = [], []

    def writer(name, texts, after_first):
        try:
            with tenant_context(tenant.id), transaction.atomic():
                principal = Principal.from_token(token)
                memory_create(principal=principal, scope="user", user="u1", text=texts[0])
                after_first()
                memory_create(principal=principal, scope="user", user="u1", text=texts[1])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append((name, repr(exc)))
        finally:
            connection.close()

    def a_after_first():
        a_first_stored.set()
        assert a_may_go_on.wait(30)

    def b_starts():
        a_first_stored.wait(30)
        connection.ensure_connection()
        b_pid.append(connection.connection.info.backend_pid)

    a = threading.Thread(target=writer, args=("A", ["alpha beta", "00zero delta"], a_after_first))
    b = threading.Thread(target=lambda: (b_starts(), writer("B", ["00zero gamma", "epsilon"], lambda: None)))
    a.start()
    b.start()
    try:
        # B's first statement waits for A's transaction (a lock), holding no lexeme row of A's next part.
        assert a_first_stored.wait(30)
        waiting = False
        for _ in range(300):
            if b_pid:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [b_pid[0]])
                    row = cursor.fetchone()
                if row and row[0] == "Lock":
                    waiting = True
                    break
            threading.Event().wait(0.05)
        assert waiting
    finally:
        a_may_go_on.set()
        a.join(60)
        b.join(60)
    assert errors == []
    assert lexeme_stats(tenant)[("user:u1", "00zero")] == 2
    assert lexeme_stats(tenant) == counted_lexemes(tenant)
