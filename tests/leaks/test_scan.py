"""The leak scan's matcher: a value is found however it was re-encoded or disguised, and numbers
are not found by chance."""

import base64
import json

import pytest

from tests.leaks.helpers import card_number, luhn_complete, my_number
from tests.scan import _base64_blobs, free_text_arguments, leaked

CANARIES = {
    "email": "bob.canary@example.com",
    "card": "4111 1111 1111 1111",
    "phone": "090-8765-4321",
    "key": "AKIAQ7ZC2LMNBV4XTRWP",
    "name": "Priya Raman",
    "password": "Tr0ub4dor&3",
    "date": "1985-04-12",
}


@pytest.mark.parametrize(
    ("stored", "name"),
    [
        ("mail bob.canary@example.com", "email"),
        ("mail BOB.CANARY@EXAMPLE.COM", "email"),
        ("/api/v1/sessions/s1/notes/bob.canary%40example.com", "email"),
        ("q=priya+raman", "name"),
        ('{"text": "bob.canary\\u0040example.com"}', "email"),
        ("['AKIA\\u2062Q7ZC2LMNBV4XTRWP']", "key"),
        ("AKIA\U000e0041\U000e0042Q7ZC2LMNBV4XTRWP", "key"),
        ("AKIA\u034fQ7ZC2LMNBV4XTRWP", "key"),
        ("AKIA\u3164Q7ZC2LMNBV4XTRWP", "key"),
        ("AKIA\ufe0fQ7ZC2LMNBV4XTRWP", "key"),
        ("ＡＫＩＡＱ７ＺＣ２ＬＭＮＢＶ４ＸＴＲＷＰ", "key"),
        ("bob.canary@ex\u0430mple.com", "email"),
        ("bob.canary@example\u3002com", "email"),
        ("card 4111111111111111", "card"),
        ("card 4111.1111.1111.1111", "card"),
        ("card 4111/1111/1111/1111", "card"),
        ("card 4111_1111_1111_1111", "card"),
        ("call ٠٩٠-٨٧٦٥-٤٣٢١", "phone"),
        ("call ०९०८७६५४३२१", "phone"),
        ("call 090 8765 4321", "phone"),
        ("pw Tr0ub4dor&amp;3", "password"),
        ("born 1985-04-12", "date"),
    ],
)
def test_it_finds_a_value_in_any_of_its_forms(stored, name):
    assert leaked(stored, CANARIES) == [name]


@pytest.mark.parametrize(
    "stored",
    [
        "mail <EMAIL_ADDRESS>, call <PHONE_NUMBER>, card <CREDIT_CARD>, key <SECRET>",
        "card 4111 1111 1111 111",  # one digit short
        "card 4111 1111, 1111 1111",  # two numbers, not one
        "born 1985/04/12",  # short numbers are compared as written
        "Priya, Raman",
    ],
)
def test_it_does_not_find_what_is_not_there(stored):
    assert leaked(stored, CANARIES) == []


def test_it_finds_short_numbers_only_as_written():
    assert leaked("order 1234-5678", ["12345678"]) == []
    assert leaked("order 1234-5678", ["1234-5678"]) == ["1234-5678"]


def test_it_decodes_base64_blobs_such_as_celery_message_bodies():
    body = base64.b64encode(json.dumps([["tenant", "call 090-8765-4321"], {}, {}]).encode())
    envelope = json.dumps({"body": body.decode(), "properties": {"body_encoding": "base64"}}).encode()
    assert leaked(envelope, CANARIES) == []
    assert leaked(b"\n".join([envelope, *_base64_blobs(envelope)]), CANARIES) == ["phone"]


def test_it_tells_ids_from_free_text_in_task_arguments():
    ids = {"args": ["0b7c2f1e-7a3b-4c1d-9e2f-3a4b5c6d7e8f", ["0b7c2f1e7a3b4c1d9e2f3a4b5c6d7e8f"], "u1", "", 3],
           "kwargs": {"repository": "backend"}}  # fmt: skip
    assert free_text_arguments(ids) == []
    text = {"args": ["0b7c2f1e-7a3b-4c1d-9e2f-3a4b5c6d7e8f", "call me at home"], "kwargs": {"note": {"a": 1}}}
    assert free_text_arguments(text) == ["call me at home", {"a": 1}]


def test_its_generated_values_are_valid():
    assert luhn_complete("411111111111111") == "4111111111111111"
    assert all(_luhn_valid(card_number(str(seed))) for seed in range(50))
    assert _my_number_valid("123456789018") and all(_my_number_valid(my_number(str(seed))) for seed in range(50))


def _luhn_valid(number: str) -> bool:
    digits = [int(d) for d in reversed(number)]
    return sum(d if i % 2 == 0 else (d * 2 - 9 if d * 2 > 9 else d * 2) for i, d in enumerate(digits)) % 10 == 0


def _my_number_valid(number: str) -> bool:
    """The check digit as the official rule states it, weights written out: 6..2 then 7..2, leftwards."""
    weights = [6, 5, 4, 3, 2, 7, 6, 5, 4, 3, 2]
    remainder = sum(int(d) * w for d, w in zip(number[:11], weights, strict=True)) % 11
    return len(number) == 12 and int(number[11]) == (0 if remainder <= 1 else 11 - remainder)
