"""Masking evasions: personal data and secrets written so that a pattern would miss them.

Each evasion goes in as a memory over REST (``POST /api/v1/memories``) and MCP (``add_note``), and
as a search query over REST (``POST /api/v1/search``) and MCP (``search_memory``), each channel
with values of its own. Personal data used as an identifier (user, repository, session,
``external_id``, a metadata key, a session note's name) must be refused with a 400 naming the
field, or a tool error naming the argument; a token name carrying it is refused or stored masked.
As in ``test_pii_canaries``, nothing is consumed while the broker is read, then a worker drains
it, and no value may be found — in any form ``tests.scan.leaked`` knows — in a database column,
Redis (decoded Celery messages included), the web and worker logs or a response.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.factories import make_tenant, make_token
from tests.leaks.helpers import (
    RUN,
    LeakScan,
    answered,
    answered_or_refused,
    aws_key,
    card_number,
    email,
    mobile_phone,
    my_number,
    refused,
    seeded_random,
    tool_answered,
    tool_refused,
)
from tests.scan import free_text_arguments

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True, databases=["default", "admin"])]

CHANNELS = ("rest memory", "mcp add_note", "rest search", "mcp search_memory")


@dataclass(frozen=True)
class Evasion:
    """``make(seed)`` → (text holding the evasion, {name: value that must be stored nowhere})."""

    id: str
    make: Callable[[str], tuple[str, dict[str, str]]]


def _inside(value: str, hidden: str, at: int) -> str:
    return value[:at] + hidden + value[at:]


def _grouped(digits: str, separator: str) -> str:
    return separator.join(digits[i : i + 4] for i in range(0, len(digits), 4))


def _in_script(text: str, zero: str) -> str:
    """ASCII digits written in the script whose zero is ``zero`` (٠ Arabic-Indic, ० Devanagari)."""
    return text.translate({ord(str(d)): chr(ord(zero) + d) for d in range(10)})


INVISIBLE = {
    "U+2062": "\u2062", "U+2063": "\u2063", "U+034F": "\u034f", "U+180E": "\u180e", "U+200E": "\u200e",
    "U+202E": "\u202e", "U+FE0F": "\ufe0f", "U+3164": "\u3164", "tag characters": "\U000e0041\U000e0042",
}  # fmt: skip


def _invisible_evasions() -> list[Evasion]:
    """A value with an invisible character inside; each side of it is looked for too, so that a
    value masked only from the invisible character on is still found."""
    evasions = []
    for name, hidden in INVISIBLE.items():

        def key(seed, hidden=hidden):
            plain = aws_key(seed)
            value = _inside(plain, hidden, 10)
            return f"Deploy with {value} today.", {"aws key": value, "its start": plain[:10], "its end": plain[10:]}

        def mail(seed, hidden=hidden):
            plain = email(seed)
            value = _inside(plain, hidden, 13)
            start, end = plain[7:13], plain[13:19]
            return f"Write to {value} about it.", {"email": value, "its start": start, "its end": end}

        def card(seed, hidden=hidden):
            plain = _grouped(card_number(seed), " ")
            value = _inside(plain, hidden, 7)
            return f"Pay with {value} please.", {"card": value, "its last ten digits": plain[7:]}

        evasions += [
            Evasion(f"{name} inside an AWS key", key),
            Evasion(f"{name} inside an email", mail),
            Evasion(f"{name} inside a card number", card),
        ]
    return evasions


def _separated_card(separator: str) -> Callable:
    def make(seed):
        value = _grouped(card_number(seed), separator)
        return f"Card {value} was charged twice.", {"card": value}

    return make


def _my_number(separator: str, context: str) -> Callable:
    def make(seed):
        value = _grouped(my_number(seed), separator)
        return f"{context} {value}", {"my number": value}

    return make


def _phone_in(zero: str) -> Callable:
    def make(seed):
        value = _in_script(mobile_phone(seed), zero)
        return f"Call {value} after six.", {"phone": value}

    return make


def _email_at(domain: str) -> Callable:
    def make(seed):
        value = email(seed, domain=domain)
        return f"Write to {value} about it.", {"email": value, "its name": value.partition("@")[0]}

    return make


def _password_behind_a_label(seed):
    rng = seeded_random(seed)
    password = (
        "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789") for _ in range(10)) + "&3"
    )
    return f'Set DB_PASSWORD="<SECRET> {password}" in the env file.', {"password": password}


def _email_behind_a_label(seed):
    value = email(seed, domain="example.com")
    return f"Contact <EMAIL_ADDRESS>{value} for access.", {"email": value, "its name": value.partition("@")[0]}


def _ssn(seed):
    rng = seeded_random(seed)
    area = rng.choice([n for n in range(1, 900) if n != 666])
    value = f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
    return f"Her social security number is {value}.", {"ssn": value}


def _birth_date(sentence: str, date_format: str) -> Callable:
    def make(seed):
        rng = seeded_random(seed)
        value = date_format.format(y=rng.randint(1950, 2000), m=rng.randint(1, 12), d=rng.randint(1, 28))
        return sentence.format(value), {"date of birth": value}

    return make


def _passport(sentence: str, letters: str, digits: int) -> Callable:
    def make(seed):
        rng = seeded_random(seed)
        value = letters + str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(digits - 1))
        return sentence.format(value), {"passport": value}

    return make


ENGLISH_NAMES = [("Priya", "Raman"), ("Aisha", "Okafor"), ("Mateo", "Silvestri"), ("Ingrid", "Holmqvist"),
                 ("Tomasz", "Wrobel"), ("Keiko", "Brennan"), ("Olusegun", "Adeyemi"),
                 ("Marisol", "Quintero")]  # fmt: skip
JAPANESE_NAMES = [("田中", "太郎"), ("佐藤", "花子"), ("鈴木", "一郎"), ("高橋", "美咲"), ("伊藤", "健太"),
                  ("渡辺", "真由美"), ("山本", "直樹"), ("中村", "優子")]  # fmt: skip


def _name(names: list[tuple[str, str]], separator: str, template: str, shortest: int) -> Callable:
    """Two names per channel, so that a name found is a channel's (seeds end with the channel). Its
    parts of ``shortest`` characters or more are looked for alone too: half a name masked is a leak."""

    def make(seed):
        channel = seed.rpartition(":")[2]
        parts = names[CHANNELS.index(channel) * 2 + seeded_random(seed).randint(0, 1)]
        value = separator.join(parts)
        alone = {f"part {i + 1}": part for i, part in enumerate(parts) if len(part) >= shortest}
        return template.format(value), {"name": value} | alone

    return make


TEXT_EVASIONS = _invisible_evasions() + [
    Evasion("card with dots", _separated_card(".")),
    Evasion("card with slashes", _separated_card("/")),
    Evasion("card with underscores", _separated_card("_")),
    Evasion("My Number with dots", _my_number(".", "My Number:")),
    Evasion("My Number with underscores", _my_number("_", "マイナンバー")),
    Evasion("phone in Arabic-Indic digits", _phone_in("\u0660")),
    Evasion("phone in Devanagari digits", _phone_in("\u0966")),
    Evasion("Cyrillic a in an email domain", _email_at("ex\u0430mple.com")),
    Evasion("ideographic full stop in an email domain", _email_at("example\u3002com")),
    Evasion("password behind a SECRET label", _password_behind_a_label),
    Evasion("email behind an EMAIL_ADDRESS label", _email_behind_a_label),
    Evasion("US SSN", _ssn),
    Evasion("date of birth, ISO", _birth_date("He was born on {}.", "{y}-{m:02d}-{d:02d}")),
    Evasion("date of birth, US", _birth_date("DOB: {}", "{m:02d}/{d:02d}/{y}")),
    Evasion("date of birth, Japanese", _birth_date("生年月日: {}", "{y}年{m}月{d}日")),
    Evasion("Japanese passport", _passport("Renew passport {} before the trip.", "TK", 7)),
    Evasion("Japanese passport, in Japanese", _passport("旅券番号 {} を確認。", "TR", 7)),
    Evasion("US passport", _passport("My passport number {} expires soon.", "", 9)),
    Evasion("English name", _name(ENGLISH_NAMES, " ", "Ask {} about the release.", shortest=6)),
    Evasion("Japanese name", _name(JAPANESE_NAMES, "", "{}さんに確認してください。", shortest=2)),
]


@dataclass(frozen=True)
class Misplaced:
    """Personal data where an identifier belongs, through one channel: ``request(value, text)`` is
    ``("rest", method, path, body, field)`` or ``("mcp", tool, arguments, argument)``, and must be
    refused naming ``field`` or ``argument``."""

    id: str
    value: Callable[[str], str]
    request: Callable[[str, str], tuple]


MISPLACED = [
    Misplaced("phone as user, REST body", mobile_phone,
              lambda v, t: ("rest", "POST", "/api/v1/memories", {"scope": "user", "user": v, "text": t}, "user")),
    Misplaced("phone as user, MCP", mobile_phone,
              lambda v, t: ("mcp", "add_note", {"text": t, "scope": "user", "user": v}, "user")),
    Misplaced("card as repository, REST body", card_number,
              lambda v, t: ("rest", "POST", "/api/v1/memories", {"scope": "repository", "repository": v, "text": t},
                            "repository")),
    Misplaced("card as repository, REST path", card_number,
              lambda v, t: ("rest", "GET", f"/api/v1/repositories/{v}/agents-md", None, "repository")),
    Misplaced("card as repository, MCP add_note", card_number,
              lambda v, t: ("mcp", "add_note", {"text": t, "repository": v}, "repository")),
    Misplaced("card as repository, MCP list_decisions", card_number,
              lambda v, t: ("mcp", "list_decisions", {"repository": v}, "repository")),
    Misplaced("My Number as session, REST body", my_number,
              lambda v, t: ("rest", "POST", "/api/v1/memories", {"scope": "session", "session": v, "user": "u1",
                                                                   "text": t}, "session")),
    Misplaced("My Number as session, REST path", my_number,
              lambda v, t: ("rest", "PUT", f"/api/v1/sessions/{v}/notes/plan", {"text": t, "user": "u1"}, "session")),
    Misplaced("My Number as session, MCP", my_number,
              lambda v, t: ("mcp", "write_session_note", {"session": v, "name": "plan", "text": t, "user": "u1"},
                            "session")),
    Misplaced("API key as external_id, REST body", aws_key,
              lambda v, t: ("rest", "POST", "/api/v1/memories", {"scope": "repository", "repository": "ids",
                                                                   "text": t, "external_id": v}, "external_id")),
    Misplaced("phone as metadata key, REST body", mobile_phone,
              lambda v, t: ("rest", "POST", "/api/v1/memories", {"scope": "repository", "repository": "ids",
                                                                   "text": t, "metadata": {v: "on call"}}, "metadata")),
    Misplaced("email as session note name, REST path", email,
              lambda v, t: ("rest", "PUT", f"/api/v1/sessions/s1/notes/{v}", {"text": t, "user": "u1"}, "name")),
    Misplaced("email as session note name, MCP", email,
              lambda v, t: ("mcp", "write_session_note", {"session": "s1", "name": v, "text": t, "user": "u1"},
                            "name")),
    Misplaced("phone as session note name, REST path", mobile_phone,
              lambda v, t: ("rest", "PUT", f"/api/v1/sessions/s1/notes/{v}", {"text": t, "user": "u1"}, "name")),
    Misplaced("phone as session note name, MCP", mobile_phone,
              lambda v, t: ("mcp", "write_session_note", {"session": "s1", "name": v, "text": t, "user": "u1"},
                            "name")),
]  # fmt: skip
TOKEN_NAMES = {"email in a token name": email, "phone in a token name": mobile_phone}


def _seed(case_id: str, channel: str) -> str:
    return f"{case_id}:{channel}"


def text_values(evasion: Evasion) -> dict[str, str]:
    """Every channel's values of one evasion, ``{"<channel>: <name>": value}``."""
    return {f"{channel}: {name}": value for channel in CHANNELS
            for name, value in evasion.make(_seed(evasion.id, channel))[1].items()}  # fmt: skip


def send_text_evasions(scan: LeakScan) -> None:
    """Each evasion in a repository of its own, so that a search's answer shows only its own memories."""
    calls = []
    for number, evasion in enumerate(TEXT_EVASIONS):
        label, repository = evasion.id, f"evasion-{number}"
        text, _ = evasion.make(_seed(evasion.id, "rest memory"))
        memory = {"scope": "repository", "repository": repository, "kind": "lesson", "text": text}
        scan.rest(label, "POST", "/api/v1/memories", answered(201), json=memory)
        text, _ = evasion.make(_seed(evasion.id, "rest search"))
        scan.rest(label, "POST", "/api/v1/search", answered(200), json={"query": text, "repository": repository})
        text, _ = evasion.make(_seed(evasion.id, "mcp add_note"))
        calls.append((label, "add_note", {"text": text, "kind": "lesson", "repository": repository}, tool_answered()))
        text, _ = evasion.make(_seed(evasion.id, "mcp search_memory"))
        calls.append((label, "search_memory", {"query": text, "repository": repository}, tool_answered()))
    scan.mcp(calls)


def send_misplaced(scan: LeakScan) -> None:
    calls = []
    for case in MISPLACED:
        channel, *request = case.request(case.value(case.id), f"An identifier probe: {case.id}.")
        if channel == "rest":
            method, path, body, field = request
            scan.rest(case.id, method, path, refused(field), **({"json": body} if body is not None else {}))
        else:
            tool, arguments, argument = request
            calls.append((case.id, tool, arguments, tool_refused(argument)))
    scan.mcp(calls)


def send_token_names(scan: LeakScan, slug: str) -> None:
    for case_id, value in TOKEN_NAMES.items():
        name = f"bot {value(_seed(case_id, 'rest'))}"
        issued = scan.rest(case_id, "POST", "/api/v1/tokens", answered_or_refused(201, "name"),
                           json={"name": name, "permissions": ["memory:read"]})  # fmt: skip
        if issued.status_code == 201:
            scan.use_token(case_id, issued.json()["token"])
        name = f"ci {value(_seed(case_id, 'command'))}"
        done = scan.command(case_id, ["manage.py", "create_token", slug, "--name", name, "--json"])
        scan.expect(case_id, done.returncode == 0 or "name" in done.stderr, f"issued or refused: {done.stderr[-300:]}")
        if done.returncode == 0:
            scan.use_token(case_id, json.loads(done.stdout)["token"])


@pytest.fixture(scope="module")
def scan(live_server_url, django_db_blocker):
    with django_db_blocker.unblock():
        tenant = make_tenant(f"evasions-{RUN}")
        token = make_token(tenant, name="evasion-agent", permissions=["memory:read", "memory:write", "admin"]).raw
    scan = LeakScan(base_url=live_server_url, token=token, tenant_id=tenant.id, django_db_blocker=django_db_blocker)
    send_text_evasions(scan)
    send_misplaced(scan)
    send_token_names(scan, tenant.slug)
    scan.read_broker()
    with scan.worker():
        scan.wait_until_drained()
    scan.collect()
    return scan


@pytest.mark.parametrize("evasion", TEXT_EVASIONS, ids=[evasion.id for evasion in TEXT_EVASIONS])
def test_it_masks(scan, evasion):
    found = {"unmet": scan.unmet[evasion.id], "found": scan.where(text_values(evasion))}
    assert found == {"unmet": [], "found": {}}


@pytest.mark.parametrize("case", MISPLACED, ids=[case.id for case in MISPLACED])
def test_it_refuses_personal_data_as_an_identifier(scan, case):
    found = {"unmet": scan.unmet[case.id], "found": scan.where({"value": case.value(case.id)})}
    assert found == {"unmet": [], "found": {}}


@pytest.mark.parametrize("case_id", TOKEN_NAMES)
def test_it_keeps_no_personal_data_of_a_token_name(scan, case_id):
    values = {channel: TOKEN_NAMES[case_id](_seed(case_id, channel)) for channel in ("rest", "command")}
    assert {"unmet": scan.unmet[case_id], "found": scan.where(values)} == {"unmet": [], "found": {}}


def test_it_queues_only_ids_for_the_worker(scan):
    tasks = [message for message in scan.messages if message["task"]]
    assert "memory_service.memories.tasks.embed_memories_task" in {message["task"] for message in tasks}
    assert {message["task"]: free_text_arguments(message) for message in tasks if free_text_arguments(message)} == {}


def test_the_scan_sees_what_the_service_stores(scan):
    """The places searched hold what the service stored, the masked text first."""
    assert "database memories_memory.text" in scan.where({"label": "<SECRET>"})
    assert "database memories_memory.text" in scan.where({"label": "<EMAIL_ADDRESS>"})
    assert "log web.log" in scan.where({"path": "/api/v1/memories"})
    assert "log worker.log" in scan.where({"task": "embed_memories_task"})
