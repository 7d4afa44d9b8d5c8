"""A turn spoken by a person the query names ranks higher (``search.named_speakers_first``): the
same pseudonym in the query and at the start of the turn's line, real masking, real PostgreSQL."""

import uuid
from dataclasses import replace

import pytest

from memory_service.pii import person_pseudonyms
from memory_service.retrieval import candidates
from memory_service.retrieval.search import RANKING
from tenants.context import tenant_context
from tenants.masking import tenant_pii_policy_set
from tests.memories.searching import search_scores, write_note

pytestmark = pytest.mark.django_db

# A conversation: Kenji's turns and Priya's. Priya's turn shares more of the question's words
# ("boat", "hull"); the question is about what Kenji did.
TURNS = [
    "Kenji Watanabe: I finally sanded the hull last weekend, it took two days.",
    "Priya Raman: The boat's hull looks rough, someone should sand the boat before spring.",
    "Kenji Watanabe: The marina wants the winter storage fee by Friday.",
    "Priya Raman: I booked the crane for the launch in April.",
]
QUESTION = "What did Kenji Watanabe do to the boat's hull?"


def _scores(tenant, ranking=RANKING) -> dict[str, float]:
    return search_scores(tenant, QUESTION, ranking)


def test_the_turns_the_person_the_question_names_speaks_gain_the_bonus(api_client, tenant):
    ids = [write_note(api_client, text) for text in TURNS]
    kenji = {ids[0], ids[2]}

    without = _scores(tenant, replace(RANKING, speaker=0.0))
    scores = _scores(tenant)

    assert set(scores) == set(without) and kenji <= set(scores)
    assert RANKING.speaker == 0.5
    for memory_id, score in scores.items():
        assert score == pytest.approx(without[memory_id] + (0.5 if memory_id in kenji else 0.0))
    # Without the bonus Priya's turn about the hull comes first; the question is about Kenji.
    assert max(without, key=without.get) == ids[1]
    assert max(scores, key=scores.get) == ids[0]


def test_names_masked_as_labels_give_no_bonus(api_client, tenant):
    tenant_pii_policy_set(tenant=tenant, mode="label")
    for text in TURNS:
        write_note(api_client, text)
    scores = _scores(tenant)
    assert len(scores) >= 2  # "<PERSON>: …" turns found, none lifted
    assert scores == pytest.approx(_scores(tenant, replace(RANKING, speaker=0.0)))


def test_another_tenant_never_learns_who_speaks_a_memory(api_client, tenant, other_tenant):
    ids = [uuid.UUID(write_note(api_client, text)) for text in TURNS]
    with tenant_context(tenant.id):
        kenji = person_pseudonyms(api_client.get(f"/api/v1/memories/{ids[0]}").json()["text"])
        assert len(kenji) == 1
        assert candidates.spoken_by(ids, people=kenji) == {ids[0], ids[2]}
    with tenant_context(other_tenant.id):
        assert candidates.spoken_by(ids, people=kenji) == set()


def test_a_speaker_is_read_before_a_colon_at_a_line_s_start_only(api_client, tenant):
    texts = [
        "Kenji Watanabe：船体を磨いた。",
        "Priya Raman: Is the hull done?\nKenji Watanabe: Sanded on Sunday.",
        "Kenji Watanabe is sanding the hull.",
        "Ask Kenji Watanabe: he knows.",
    ]
    ids = [uuid.UUID(write_note(api_client, text)) for text in texts]
    with tenant_context(tenant.id):
        kenji = person_pseudonyms(api_client.get(f"/api/v1/memories/{ids[2]}").json()["text"])
        # A full-width colon too, and a later line; never a mention.
        assert candidates.spoken_by(ids, people=kenji) == {ids[0], ids[1]}


SPOKEN = [
    "[2025-02-08] Kenji Watanabe: sanded the hull.",
    "[10:32] Kenji Watanabe: sanded the hull.",
    "10:32 Kenji Watanabe: sanded the hull.",
    "2025-02-08 14:05 Kenji Watanabe: sanded the hull.",
    "**Kenji Watanabe**: sanded the hull.",
    "**Kenji Watanabe:** sanded the hull.",
    "- Kenji Watanabe: sanded the hull.",
    "> Kenji Watanabe: sanded the hull.",
    "12. Kenji Watanabe: sanded the hull.",
    "Kenji Watanabe (10:32): sanded the hull.",
    "  Kenji Watanabe : sanded the hull.",
    "【10:32】Kenji Watanabe：船体を磨いた。",
]
# A name inside a sentence before a colon, or in brackets with no colon, is a mention.
MENTIONED = [
    "[Kenji Watanabe] sanded the hull.",
    "We told Kenji Watanabe: sand the hull first.",
    "(ask Kenji Watanabe): the hull.",
    "2025-02-08 the hull, said Kenji Watanabe: done.",
]


@pytest.mark.parametrize(("line", "spoken"), [(line, True) for line in SPOKEN] + [(line, False) for line in MENTIONED])
def test_a_speaker_is_read_in_the_forms_transcripts_write_a_turn_and_nowhere_else(api_client, tenant, line, spoken):
    ids = [uuid.UUID(write_note(api_client, text)) for text in (line, "Kenji Watanabe is sanding the hull.")]
    with tenant_context(tenant.id):
        kenji = person_pseudonyms(api_client.get(f"/api/v1/memories/{ids[1]}").json()["text"])
        assert candidates.spoken_by(ids, people=kenji) == ({ids[0]} if spoken else set())


def test_a_person_s_pseudonyms_are_read_from_a_masked_text_once_each():
    text = "<PERSON_1a2b3c4d5e6f> met <PERSON_0f0f0f0f0f0f> and <PERSON_1a2b3c4d5e6f> at <EMAIL_ADDRESS_aaaaaaaaaaaa>"
    assert person_pseudonyms(text) == ["1a2b3c4d5e6f", "0f0f0f0f0f0f"]
    assert person_pseudonyms("<PERSON> met <PERSON> at <LOCATION>") == []
