"""Spellings meant to slip a value past the masker: invisible characters, other scripts' digits and
letters, other separators, labels typed into the input. Each is masked in the original text, which
keeps the writer's characters everywhere else."""

import pytest

from memory_service.pii import MaskingPolicy
from memory_service.pii.normalize import normalize
from memory_service.pii.recognizers import luhn_is_valid, ssn_is_valid

AWS_KEY = "AKIAQWERTYUIOPASDFGH"

INVISIBLE = {
    "invisible times": "\u2062",
    "invisible separator": "\u2063",
    "combining grapheme joiner": "\u034f",
    "mongolian vowel separator": "\u180e",
    "left-to-right mark": "\u200e",
    "right-to-left override": "\u202e",
    "variation selector 16": "\ufe0f",
    "hangul filler": "\u3164",
    "tag latin capital a": "\U000e0041",
    "zero width space": "\u200b",
}


@pytest.mark.parametrize("char", INVISIBLE.values(), ids=INVISIBLE.keys())
@pytest.mark.parametrize(
    ("value", "entity"),
    [(AWS_KEY, "SECRET"), ("bob.canary@example.com", "EMAIL_ADDRESS"), ("4111 1111 1111 1111", "CREDIT_CARD")],
)
def test_it_masks_a_value_with_an_invisible_character_inside(masker, policy, char, value, entity):
    hidden = value[:6] + char + value[6:]

    result = masker.mask(f"note: {hidden} end", policy)

    assert result.text == f"note: <{entity}> end"


def test_normalisation_removes_format_characters_maps_digits_and_folds_look_alikes():
    original = "x\u2063y ٠٩٠ ०९० bob@exаmple。com"
    normalized = normalize(original)

    assert normalized.text == "xy 090 090 bob@exаmple。com"  # letters stay for the name tier
    assert normalized.folded == "xy 090 090 bob@example.com"
    assert len(normalized.folded) == len(normalized.text)
    start, end = normalized.original_span(3, 6)
    assert original[start:end] == "٠٩٠"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("card 4111.1111.1111.1111 ok", "card <CREDIT_CARD> ok"),
        ("card 4111/1111/1111/1111 ok", "card <CREDIT_CARD> ok"),
        ("card 4111_1111_1111_1111 ok", "card <CREDIT_CARD> ok"),
        ("amex 3782.822463.10005 ok", "amex <CREDIT_CARD> ok"),
        ("version 4111.1111.1111.1111 ok", "version <CREDIT_CARD> ok"),  # not a version number
        ("my number 1234.5678.9018 ok", "my number <JP_MY_NUMBER> ok"),
        ("my number 1234_5678_9018 ok", "my number <JP_MY_NUMBER> ok"),
        ("my number 1234 5678 9018 ok", "my number <JP_MY_NUMBER> ok"),
        ("call 090.1234.5678 ok", "call <PHONE_NUMBER> ok"),
        ("call 090/1234/5678 ok", "call <PHONE_NUMBER> ok"),
        ("call 090_1234_5678 ok", "call <PHONE_NUMBER> ok"),
        ("call ٠٩٠-١٢٣٤-٥٦٧٨ ok", "call <PHONE_NUMBER> ok"),
        ("call ०९०-१२३४-५६७८ ok", "call <PHONE_NUMBER> ok"),
        ("mail bob@exаmple.com ok", "mail <EMAIL_ADDRESS> ok"),  # Cyrillic а
        ("mail bob@example。com ok", "mail <EMAIL_ADDRESS> ok"),
        ("mail bοb@example.com ok", "mail <EMAIL_ADDRESS> ok"),  # Greek ο
    ],
)
def test_it_masks_other_separators_scripts_and_look_alikes(masker, policy, text, expected):
    assert masker.mask(text, policy).text == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('DB_PASSWORD="<SECRET> Tr0ub4dor&3"', 'DB_PASSWORD="<SECRET>"'),
        ("<EMAIL_ADDRESS>bob.canary@example.com", "<EMAIL_ADDRESS><EMAIL_ADDRESS>"),
        ("token=<SECRET>" + AWS_KEY, "token=<SECRET><SECRET>"),
        ("call <PHONE_NUMBER> 090-1234-5678", "call <PHONE_NUMBER> <PHONE_NUMBER>"),
    ],
)
def test_a_label_in_the_input_never_hides_a_value(masker, policy, text, expected):
    result = masker.mask(text, policy)

    assert result.text == expected
    assert masker.mask(result.text, policy).text == result.text


def test_labels_alone_are_left_as_they_are(masker, policy):
    text = "password: <SECRET>, mail <EMAIL_ADDRESS>, by <PERSON>"

    assert masker.mask(text, policy).text == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SSN 536-22-8451 on file", "SSN <US_SSN> on file"),
        ("ssn: 536228451", "ssn: <US_SSN>"),
        ("social security number is 536 22 8451", "social security number is <US_SSN>"),
        ("born on 1985-04-12 in", "born on <DATE_OF_BIRTH> in"),
        ("DOB: 04/12/1985", "DOB: <DATE_OF_BIRTH>"),
        ("date of birth April 12, 1985.", "date of birth <DATE_OF_BIRTH>."),
        ("生年月日: 1985年4月12日", "生年月日: <DATE_OF_BIRTH>"),
        ("1990年1月2日生まれのエンジニア", "<DATE_OF_BIRTH>生まれのエンジニア"),
        ("誕生日は昭和60年4月12日", "誕生日は<DATE_OF_BIRTH>"),
        ("passport TK1234567 expires", "passport <PASSPORT> expires"),
        ("旅券番号 TR8429173", "旅券番号 <PASSPORT>"),
        ("passport number 512345678", "passport number <PASSPORT>"),
        ("パスポート番号はAB7654321です", "パスポート番号は<PASSPORT>です"),
    ],
)
def test_it_masks_ssns_dates_of_birth_and_passports(masker, policy, text, expected):
    assert masker.mask(text, policy).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "SSN 000-12-3456 and 666-12-3456 and 912-12-3456 are never issued",
        "SSN 536-00-8451 or 536-22-0000",
        "the sample 123-45-6789",
        "released on 1985-04-12",  # a date without a birth context
        "deadline 04/12/1985",
        "migration 20240115 ran 512345678 rows",  # nine digits without a passport context
        "ticket TK1234567 closed",
    ],
)
def test_it_leaves_invalid_numbers_and_dates_without_context_alone(masker, policy, text):
    assert masker.mask(text, policy).text == text


def test_secrets_always_become_secret_even_in_pseudonym_mode(masker, pseudonym_policy):
    assert masker.mask(f"key {AWS_KEY}", pseudonym_policy).text == "key <SECRET>"


def test_a_tenant_that_names_only_other_types_still_masks_secrets(masker):
    policy = MaskingPolicy(tenant_id="t", entities=frozenset({"US_SSN"}))

    assert masker.mask(f"SSN 536-22-8451 key {AWS_KEY} bob@example.com", policy).text == (
        "SSN <US_SSN> key <SECRET> bob@example.com"
    )


def test_the_checks_follow_their_rules():
    assert luhn_is_valid("4111111111111111") and not luhn_is_valid("4111111111111112")
    assert ssn_is_valid("536228451")
    assert not any(ssn_is_valid(n) for n in ("000228451", "666228451", "936228451", "536008451", "536220000"))


def test_spellings_of_one_ssn_get_one_pseudonym(masker, pseudonym_policy):
    dashed = masker.mask("SSN 536-22-8451", pseudonym_policy).text
    dotted = masker.mask("SSN 536.22.8451", pseudonym_policy).text

    assert dashed == dotted and dashed.startswith("SSN <US_SSN_")
