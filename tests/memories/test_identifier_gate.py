"""A query that holds an identifier keeps the lexical gate open (``search.lexical_gate_open``,
``lexical.holds_identifier``): the note of another language that names it still wins on its words.
Real masking, real embeddings, real PostgreSQL."""

import pytest

from memory_service.retrieval import search
from memory_service.retrieval.lexical import holds_identifier
from tests.memories.searching import search_scores, write_note

pytestmark = pytest.mark.django_db

# Mostly Japanese notes, so that the model's nearest notes to an English query are Japanese and the
# gate would close; one of them names the identifier.
JAPANESE = [
    "Android 12 以降で SCHEDULE_EXACT_ALARM の権限がないとアプリが落ちる。起動時に確認する。",
    "リリース前にステージングで決済の通しテストを行う。",
    "夜間バッチは午前二時に開始する。失敗したら翌朝に再実行する。",
    "本番データベースへの接続は踏み台サーバー経由に限る。",
    "ログには個人情報を出さない。カード番号は下四桁も出さない。",
    "通知の文言は翻訳チームの確認を経てから出す。",
    "障害対応の振り返りは一週間以内にまとめる。",
    "キャッシュの有効期限は五分にする。",
]
ENGLISH = [
    "Exact alarms on newer Android versions need a permission the user grants in settings.",
    "The mobile app checks its minimum supported version on start.",
]
QUERY = "SCHEDULE_EXACT_ALARM"

IDENTIFIERS = ["SCHEDULE_EXACT_ALARM", "pool_size", "max.poll.records", "Node.js", "E2E", "threeds_v2",
               "reducedMotion", "ImagePullBackOff", "X-Debug-Token", "kuromoji_stemmer を入れた理由"]  # fmt: skip
NOT_IDENTIFIERS = ["rotate signing keys", "end-to-end purchase test", "third-party cookies", "Node 18",
                   "2024年の年末セール", "What did <PERSON_1a2b3c4d5e6f> say?",
                   "mail <EMAIL_ADDRESS_1a2b3c4d5e6f>"]  # fmt: skip


def _scores(tenant) -> dict[str, float]:
    return search_scores(tenant, QUERY)


@pytest.mark.parametrize(
    ("query", "expected"), [(q, True) for q in IDENTIFIERS] + [(q, False) for q in NOT_IDENTIFIERS]
)
def test_an_identifier_is_words_joined_by_underscores_or_dots_a_digit_or_a_capital_inside(query, expected):
    assert holds_identifier(query) is expected


def test_the_note_of_another_language_that_names_the_identifier_gets_its_full_text_score(
    api_client, tenant, embed_all, monkeypatch
):
    ids = [write_note(api_client, text) for text in JAPANESE + ENGLISH]
    embed_all()

    scores = _scores(tenant)
    # The same search with the identifier not recognised: most of the model's nearest notes are
    # Japanese, the gate closes, and the note's full-text match no longer counts.
    monkeypatch.setattr(search, "holds_identifier", lambda query, besides: False)
    closed = _scores(tenant)

    assert max(scores, key=scores.get) == ids[0]
    assert scores[ids[0]] > closed[ids[0]] + 0.3  # the lexical weight (0.5) of a near-ideal match
    assert set(closed) <= set(scores)  # the open gate adds full-text candidates, never drops one


def test_another_tenants_note_that_names_the_identifier_is_never_found(
    api_client, tenant, embed_all, other_client, other_tenant
):
    ours = {write_note(api_client, text) for text in JAPANESE + ENGLISH}
    theirs = write_note(other_client, JAPANESE[0])
    embed_all()

    assert set(_scores(tenant)) <= ours
    assert set(_scores(other_tenant)) == {theirs}
