"""The masker's contract: policies, labels and pseudonyms, counts, idempotence, tiers."""

import ast
import logging
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import spacy

import memory_service.pii
from memory_service.pii import (
    ENTITY_TYPES,
    SECRET,
    Masker,
    MaskingPolicy,
    MaskResult,
    PiiTierUnavailable,
    get_masker,
    text_for_embedding,
)
from memory_service.pii.names import EnglishNames

ROOT = Path(__file__).resolve().parents[2]
NOTE = (
    "Ping bob@example.com or 090-1234-5678; card 4111 1111 1111 1111; "
    "db password=hunter22; 住所は東京都千代田区丸の内1-2-3、〒100-0005。"
)


def test_it_exports_the_public_api():
    assert set(memory_service.pii.__all__) == {
        "ENTITY_TYPES",
        "REGEX_ENTITIES",
        "SECRET",
        "MaskResult",
        "Masker",
        "MaskingPolicy",
        "PiiTierUnavailable",
        "get_masker",
        "person_pseudonyms",
        "pseudonyms_only",
        "text_for_embedding",
    }
    assert SECRET == "SECRET"
    assert set(ENTITY_TYPES) == {
        "SECRET",
        "EMAIL_ADDRESS",
        "CREDIT_CARD",
        "IBAN_CODE",
        "IP_ADDRESS",
        "PHONE_NUMBER",
        "JP_MY_NUMBER",
        "JP_POSTAL_CODE",
        "ADDRESS",
        "US_SSN",
        "DATE_OF_BIRTH",
        "PASSPORT",
        "PERSON",
        "LOCATION",
    }


def test_it_loads_the_name_tier_from_the_installed_packages(masker):
    assert masker.tiers == frozenset({"regex", "ner"})
    assert masker.ner_languages == frozenset({"en", "ja"})
    assert masker.version == "pii-8/regex+ner"


@pytest.fixture(scope="module")
def regex_masker() -> Masker:
    """A masker without the name tier, as a process without the models would build it."""
    return Masker()


def test_it_builds_the_regex_tier_alone_without_name_finders(regex_masker, policy):
    assert regex_masker.tiers == frozenset({"regex"})
    assert regex_masker.version == "pii-8/regex"
    assert regex_masker.mask("Alice Smith: bob@example.com", policy).text == "Alice Smith: <EMAIL_ADDRESS>"


def test_it_masks_names_in_english_and_japanese_notes(masker, policy):
    assert masker.mask("Per Priya Raman, bump the pool size.", policy).text == "Per <PERSON>, bump the pool size."
    assert masker.mask("田中さんと佐藤花子が承認した。", policy).text == "<PERSON>さんと<PERSON>が承認した。"


def test_it_keeps_tool_names_a_model_takes_for_people(masker, policy):
    text = "After the Jenkins outage we moved Kafka consumers to Redis streams; Django stays."

    assert masker.mask(text, policy).text == text


def test_it_batches_the_name_tier_and_masks_each_text_as_alone(masker, policy):
    texts = ["Ask Maria Gonzalez first.", "no names here", "鈴木さんに確認", "Bob said hi to bob@example.com"]

    assert [result.text for result in masker.mask_each(texts, policy)] == [
        masker.mask(text, policy).text for text in texts
    ]


def test_it_returns_one_process_wide_masker_even_under_concurrent_first_use(monkeypatch):
    built = []

    def slow_build(**kwargs):
        time.sleep(0.05)
        built.append(object())
        return built[-1]

    monkeypatch.setattr("memory_service.pii.engine._masker", None)
    monkeypatch.setattr("memory_service.pii.engine.Masker", slow_build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(get_masker())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(built) == 1
    assert all(result is built[0] for result in results)


def test_it_replaces_with_labels_and_counts_per_type(masker, policy):
    result = masker.mask(NOTE, policy)

    assert result == MaskResult(
        text=(
            "Ping <EMAIL_ADDRESS> or <PHONE_NUMBER>; card <CREDIT_CARD>; "
            "db password=<SECRET>; 住所は<ADDRESS>、〒<JP_POSTAL_CODE>。"
        ),
        counts={
            "EMAIL_ADDRESS": 1,
            "PHONE_NUMBER": 1,
            "CREDIT_CARD": 1,
            "SECRET": 1,
            "ADDRESS": 1,
            "JP_POSTAL_CODE": 1,
        },
    )


def test_it_counts_repeated_values_each_time(masker, policy):
    result = masker.mask("a@example.com, b@example.com and a@example.com; call 03-1234-5678", policy)

    assert result.counts == {"EMAIL_ADDRESS": 3, "PHONE_NUMBER": 1}


def test_it_leaves_text_without_pii_alone(masker, policy):
    assert masker.mask("Refactor the retry loop; no behaviour change.", policy) == MaskResult(
        text="Refactor the retry loop; no behaviour change.", counts={}
    )
    assert masker.mask("", policy) == MaskResult(text="", counts={})


def test_it_keeps_the_original_formatting_around_replacements(masker, policy):
    text = "  Line one\n\tmail:\u3000ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ\u200b ｡\n"

    assert masker.mask(text, policy).text == "  Line one\n\tmail:\u3000<EMAIL_ADDRESS>\u200b ｡\n"


def test_it_gives_the_same_value_the_same_pseudonym_within_a_tenant(masker, pseudonym_policy):
    first = masker.mask("mail bob@example.com", pseudonym_policy).text
    second = masker.mask("BOB@Example.com wrote back; ｂｏｂ＠ｅｘａｍｐｌｅ．ｃｏｍ too", pseudonym_policy).text

    pseudonym = first.removeprefix("mail ")
    assert pseudonym.startswith("<EMAIL_ADDRESS_") and len(pseudonym) == len("<EMAIL_ADDRESS_>") + 12
    assert second == f"{pseudonym} wrote back; {pseudonym} too"


def test_it_gives_spellings_of_one_phone_number_the_same_pseudonym(masker, pseudonym_policy):
    text = "090-1234-5678 / 09012345678 / +81 90 1234 5678 / ０９０－１２３４－５６７８"

    result = masker.mask(text, pseudonym_policy)

    pseudonyms = result.text.split(" / ")
    assert len(set(pseudonyms)) == 1 and pseudonyms[0].startswith("<PHONE_NUMBER_")
    assert result.counts == {"PHONE_NUMBER": 4}


def test_it_gives_different_values_different_pseudonyms(masker, pseudonym_policy):
    text = masker.mask("alice@example.com bob@example.com", pseudonym_policy).text

    first, second = text.split()
    assert first != second


def test_it_separates_tenants_and_key_versions(masker, pseudonym_policy):
    text = "mail bob@example.com"
    tenant_a = masker.mask(text, pseudonym_policy).text
    tenant_b = masker.mask(text, replace(pseudonym_policy, tenant_id="tenant-b")).text
    new_key = masker.mask(text, replace(pseudonym_policy, pseudonym_key=b"other", pseudonym_key_version="2")).text

    assert len({tenant_a, tenant_b, new_key}) == 3


def test_it_always_writes_secrets_as_plain_labels(masker, pseudonym_policy):
    result = masker.mask("password=hunter22 bob@example.com", pseudonym_policy)

    assert result.text.startswith("password=<SECRET> <EMAIL_ADDRESS_")


@pytest.mark.parametrize("mode", ["label", "pseudonym"])
def test_it_is_idempotent(masker, mode):
    policy = MaskingPolicy(tenant_id="tenant-a", mode=mode, pseudonym_key=b"k")
    once = masker.mask(NOTE, policy)

    twice = masker.mask(once.text, policy)

    assert twice == MaskResult(text=once.text, counts={})


def test_it_masks_pii_uncovered_by_another_replacement_in_the_same_call(masker, policy):
    text = "〒100-0005DE89370400440532013000"

    result = masker.mask(text, policy)

    assert result == MaskResult(text="〒<JP_POSTAL_CODE><IBAN_CODE>", counts={"JP_POSTAL_CODE": 1, "IBAN_CODE": 1})
    assert masker.mask(result.text, policy).counts == {}


def test_it_leaves_existing_labels_stable(masker, policy):
    text = "<EMAIL_ADDRESS> called <PHONE_NUMBER_090123456789> about <SECRET>; token: <SECRET>"

    assert masker.mask(text, policy) == MaskResult(text=text, counts={})


def test_it_masks_only_the_policy_entities_and_always_secrets(masker):
    policy = MaskingPolicy(tenant_id="tenant-a", entities=frozenset({"EMAIL_ADDRESS"}))

    result = masker.mask(NOTE, policy)

    assert result.text == (
        "Ping <EMAIL_ADDRESS> or 090-1234-5678; card 4111 1111 1111 1111; "
        "db password=<SECRET>; 住所は東京都千代田区丸の内1-2-3、〒100-0005。"
    )
    assert result.counts == {"EMAIL_ADDRESS": 1, "SECRET": 1}


def test_it_masks_secrets_with_an_empty_entity_set(masker):
    policy = MaskingPolicy(tenant_id="tenant-a", entities=frozenset())

    assert masker.mask("bob@example.com password=hunter22", policy).text == "bob@example.com password=<SECRET>"


def test_it_lets_a_secret_win_an_overlap(masker, policy):
    assert masker.mask("password=alice@example.com", policy).counts == {"SECRET": 1}


def test_it_sums_counts_over_many_texts(masker, policy):
    texts, counts = masker.mask_many(["bob@example.com", "no pii", "090-1234-5678 and ann@example.com"], policy)

    assert texts == ["<EMAIL_ADDRESS>", "no pii", "<PHONE_NUMBER> and <EMAIL_ADDRESS>"]
    assert counts == {"EMAIL_ADDRESS": 2, "PHONE_NUMBER": 1}


def test_it_refuses_a_policy_that_requires_ner_without_the_ner_tier(regex_masker):
    policy = MaskingPolicy(tenant_id="tenant-a", require_ner=True)

    with pytest.raises(PiiTierUnavailable) as raised:
        regex_masker.mask("bob@example.com", policy)

    assert raised.value.tier == "ner"
    with pytest.raises(PiiTierUnavailable):
        regex_masker.check_policy(policy)


def test_it_refuses_a_policy_naming_an_entity_only_ner_detects(regex_masker):
    with pytest.raises(PiiTierUnavailable):
        regex_masker.check_policy(MaskingPolicy(tenant_id="tenant-a", entities=frozenset({"PERSON"})))


@pytest.mark.parametrize(
    "policy",
    [
        MaskingPolicy(tenant_id="t", entities=frozenset({"EMAIL"})),
        MaskingPolicy(tenant_id="t", mode="hash"),
        MaskingPolicy(tenant_id="t", mode="pseudonym"),
    ],
)
def test_it_rejects_a_malformed_policy(masker, policy):
    with pytest.raises(ValueError):
        masker.mask("bob@example.com", policy)


@pytest.fixture(scope="module")
def ner_masker() -> Masker:
    """A masker with an English NER pipeline: a rule-based stand-in for a statistical model."""
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns(
        [
            {"label": "PERSON", "pattern": "Alice Smith"},
            {"label": "GPE", "pattern": "Paris"},
            {"label": "ORG", "pattern": "Acme"},
        ]
    )
    return Masker(name_finders={"en": EnglishNames(nlp, lexicon=False)})


def test_it_masks_people_and_places_with_the_ner_tier(ner_masker):
    policy = MaskingPolicy(tenant_id="tenant-a", require_ner=True)
    text = "Alice Smith of Acme moved to Paris; mail alice@example.com"

    result = ner_masker.mask(text, policy)
    with_places = ner_masker.mask(text, replace(policy, entities=frozenset({"PERSON", "LOCATION", "EMAIL_ADDRESS"})))

    assert ner_masker.tiers == frozenset({"regex", "ner"})
    assert ner_masker.version == "pii-8/regex+ner"
    assert result.text == "<PERSON> of Acme moved to Paris; mail <EMAIL_ADDRESS>"  # places only when named
    assert with_places.text == "<PERSON> of Acme moved to <LOCATION>; mail <EMAIL_ADDRESS>"
    assert with_places.counts == {"PERSON": 1, "LOCATION": 1, "EMAIL_ADDRESS": 1}


def test_it_refuses_ner_for_a_language_without_a_ner_pipeline(ner_masker):
    with pytest.raises(PiiTierUnavailable) as raised:
        ner_masker.mask("山田さんに連絡", MaskingPolicy(tenant_id="tenant-a", require_ner=True))

    assert (raised.value.tier, raised.value.language) == ("ner", "ja")
    assert ner_masker.mask("山田さんに連絡", MaskingPolicy(tenant_id="tenant-a")).text == "山田さんに連絡"


def test_it_never_logs_the_text_it_masks(masker, policy, caplog):
    with caplog.at_level(logging.DEBUG):
        masker.mask("unique-marker bob@example.com 090-1234-5678 password=hunter22", policy)

    assert "unique-marker" not in caplog.text and "hunter22" not in caplog.text


def test_it_does_not_import_django():
    for path in (ROOT / "memory_service" / "pii").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(name.split(".")[0] == "django" for name in names), path


def test_it_builds_and_masks_without_any_network_access():
    """A fresh process whose sockets all fail builds a masker and still validates email domains."""
    script = """
import socket

def refuse(*args, **kwargs):
    raise OSError("network access attempted")

socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse

from memory_service.pii.engine import Masker, MaskingPolicy

result = Masker().mask("mail bob@example.co.jp, react@18.2.0", MaskingPolicy(tenant_id="t"))
assert result.text == "mail <EMAIL_ADDRESS>, react@18.2.0", result.text
print("ok")
"""
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )

    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "ok"
    assert "network access attempted" not in completed.stderr


def test_it_reports_detections_in_original_offsets(masker, policy):
    text = "mail ａ＠ｂ．ｊｐ or call 090\u200b-1234-5678"

    detections = masker.detect(text, policy)

    assert [(d.entity, text[d.start : d.end], d.value) for d in detections] == [
        ("EMAIL_ADDRESS", "ａ＠ｂ．ｊｐ", "a@b.jp"),
        ("PHONE_NUMBER", "090\u200b-1234-5678", "090-1234-5678"),
    ]


@pytest.mark.parametrize(
    ("masked", "expected"),
    [
        ("<PERSON_48b61a8eb353>: Alive, mostly.", ": Alive, mostly."),
        ("ask <PERSON> or <PERSON_0123456789ab> today", "ask  or  today"),
        ("mail <EMAIL_ADDRESS_8cb238f10ec1>, call <PHONE_NUMBER>", "mail <EMAIL_ADDRESS>, call <PHONE_NUMBER>"),
        (
            "<SECRET> in <LOCATION_0123456789ab>, 〒<JP_POSTAL_CODE_0123456789ab>",
            "<SECRET> in <LOCATION>, 〒<JP_POSTAL_CODE>",
        ),
        (
            "<PERSONA> <PERSON_xyz> <person_0123456789ab> <Q_0123456789ab>",
            "<PERSONA> <PERSON_xyz> <person_0123456789ab> <Q_0123456789ab>",
        ),
    ],
)
def test_text_for_embedding_leaves_people_out_and_other_pseudonyms_as_labels(masked, expected):
    assert text_for_embedding(masked) == expected


def test_text_for_embedding_reads_what_the_masker_writes(masker, pseudonym_policy):
    masked = masker.mask("Priya Raman (priya@example.com) approved it.", pseudonym_policy).text

    assert text_for_embedding(masked) == " (<EMAIL_ADDRESS>) approved it."
