"""One leak scan over the running service: values go in through its interfaces while no worker
consumes, the broker's queued messages are read, then a worker drains them and everything a value
could have reached is collected — every text column of the database (as the schema owner), the
broker's Redis database, the web and worker logs written meanwhile, every response and the output
of every command run.

Inputs that are expected to succeed or to be refused record whether they were (``unmet``) instead
of raising, so that one surprise does not hide what the others did.
"""

import json
import os
import random
import secrets
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from contextlib import contextmanager

import httpx
from django.conf import settings
from django.db import connections

from tests.conftest import child_process_env, log_file, purge_queues, run_worker
from tests.mcp.helpers import call_many
from tests.scan import Haystack, celery_messages, database_text, leaked, redis_dump

LOGS = ("web.log", "worker.log")
#: Values differ from run to run, so that what an earlier run left in Redis or the database is never
#: taken for what this run stored; ``LEAK_SCAN_SEED`` (printed after the run) repeats a run's.
RUN = os.environ.get("LEAK_SCAN_SEED") or secrets.token_hex(3)


# --- values -----------------------------------------------------------------------------------


def seeded_random(seed: str) -> random.Random:
    """A generator of this run's values for ``seed``."""
    return random.Random(f"leaks:{RUN}:{seed}")


def luhn_complete(prefix: str) -> str:
    """``prefix`` followed by its Luhn check digit."""
    total = 0
    for position, digit in enumerate(reversed(prefix)):
        value = int(digit) * (2 if position % 2 == 0 else 1)
        total += value - 9 if value > 9 else value
    return prefix + str(-total % 10)


def card_number(seed: str) -> str:
    """A Luhn-valid 16-digit Visa-shaped number (no separators)."""
    rng = seeded_random(seed)
    return luhn_complete("4" + "".join(rng.choice("0123456789") for _ in range(14)))


def my_number(seed: str) -> str:
    """A valid 12-digit My Number: 11 digits and the official check digit (P(n) the n-th digit from
    the right, Q(n) = n + 1 for n ≤ 6, n − 5 above; r = Σ P·Q mod 11; 0 if r ≤ 1, else 11 − r)."""
    rng = seeded_random(seed)
    body = str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(10))
    total = sum(int(p) * (n + 1 if n <= 6 else n - 5) for n, p in enumerate(reversed(body), start=1))
    return body + str(0 if total % 11 <= 1 else 11 - total % 11)


def mobile_phone(seed: str) -> str:
    """A Japanese mobile number, ``090-NNNN-NNNN``."""
    rng = seeded_random(seed)
    return f"090-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}"


def aws_key(seed: str) -> str:
    rng = seeded_random(seed)
    return "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16))


def github_token(seed: str) -> str:
    rng = seeded_random(seed)
    return "ghp_" + "".join(
        rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(36)
    )


def email(seed: str, domain: str = "example.org") -> str:
    """``canary.<12 random consonants>@domain``: either half of the random part is distinctive alone."""
    rng = seeded_random(seed)
    return f"canary.{''.join(rng.choice('bcdfghjkmnpqrstvwxz') for _ in range(12))}@{domain}"


def canaries(seed: str) -> dict[str, str]:
    """An email, a phone number, a card number and a GitHub token of one input, distinct from any other's."""
    return {
        "email": email(seed),
        "phone": mobile_phone(seed),
        "card": card_number(seed),
        "github token": github_token(seed),
    }


def sentence(values: Mapping[str, str]) -> str:
    """All of ``canaries`` in one sentence."""
    return f"Mail {values['email']}, call {values['phone']}, card {values['card']}, token {values['github token']}."


# --- expectations -----------------------------------------------------------------------------


def answered(*statuses: int):
    """A response with one of these statuses."""
    return f"status {' or '.join(map(str, statuses))}", lambda response: response.status_code in statuses


def refused(field: str):
    """A 400 whose error names ``field``."""

    def check(response) -> bool:
        try:
            fields = response.json()["error"]["fields"]
        except (ValueError, KeyError, TypeError):
            return False
        return response.status_code == 400 and field in fields

    return f"400 naming {field!r}", check


def answered_or_refused(status: int, field: str):
    """A response with ``status``, or a 400 naming ``field``."""
    what, check = refused(field)
    return f"status {status}, or {what}", lambda response: response.status_code == status or check(response)


def tool_answered():
    return "a tool result", lambda outcome: outcome[0] is False


def tool_refused(argument: str):
    """A tool error naming ``argument`` (``(name: …)`` in the message)."""
    return f"a tool error naming {argument!r}", lambda outcome: outcome[0] is True and f"{argument}:" in str(outcome[1])


# --- the scan ---------------------------------------------------------------------------------


class LeakScan:
    """Sends values through the live service and collects where they went (see the module docstring)."""

    def __init__(self, *, base_url: str, token: str, tenant_id, django_db_blocker):
        self.base_url = base_url
        self.token = token
        self.tenant_id = str(tenant_id)
        self.blocker = django_db_blocker
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.responses: dict[str, list[bytes]] = defaultdict(list)
        self.outputs: dict[str, bytes] = {}
        self.unmet: dict[str, list[str]] = defaultdict(list)
        self.extra: dict[str, Haystack] = {}
        purge_queues()
        # Left unacknowledged by a worker that an earlier test killed: redelivered only after the
        # visibility timeout, so not waited for.
        self.stale = {message["id"] for message in celery_messages(settings.REDIS_URL)}
        self.offsets = {name: log_file(name).stat().st_size if log_file(name).exists() else 0 for name in LOGS}

    # sending

    def expect(self, label: str, ok: bool, what: str) -> None:
        if not ok:
            self.unmet[label].append(what)

    def rest(
        self, label: str, method: str, path: str, expect=None, *, http: httpx.Client | None = None, keep: bool = True,
        **kwargs,
    ):  # fmt: skip
        """One request; its response is checked against ``expect`` and, unless ``keep`` is False (a
        page that shows its user what they just typed), searched with the rest under ``label``."""
        response = (http or self.http).request(method, path, **kwargs)
        if keep:
            self.responses[label].append(response.content)
        if expect is not None:
            what, check = expect
            self.expect(label, check(response), f"{method} {path}: {what}, got {response.status_code}")
        return response

    def use_token(self, label: str, raw: str) -> None:
        """One request with another token, whose name its log line shows (the list it answers is
        the database's, searched there)."""
        with httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {raw}"}, timeout=60) as http:
            self.rest(label, "GET", "/api/v1/memories", answered(200), http=http, keep=False)

    def mcp(self, calls: list[tuple[str, str, dict, tuple]]) -> list:
        """Tool calls in one MCP session: (label, tool, arguments, expectation) each."""
        outcomes = call_many(f"{self.base_url}/mcp/", self.token, [(tool, args) for _, tool, args, _ in calls])
        for (label, tool, _, (what, check)), outcome in zip(calls, outcomes, strict=True):
            self.responses[label].append(json.dumps(outcome, ensure_ascii=False).encode())
            self.expect(label, check(outcome), f"{tool}: {what}, got {str(outcome)[:300]}")
        return outcomes

    def command(self, label: str, argv: list[str], *, env: dict | None = None):
        """Run a command (``manage.py``, the CLI) against the live service; its output is recorded."""
        base = child_process_env(self.blocker) | {"DJANGO_SETTINGS_MODULE": "memory_service.settings.base"}
        done = subprocess.run([sys.executable, *argv], env=base | (env or {}), capture_output=True, text=True,
                              timeout=120, cwd=settings.BASE_DIR)  # fmt: skip
        self.outputs[label] = (done.stdout + "\n" + done.stderr).encode()
        return done

    # phases

    def read_broker(self) -> None:
        """What waits in the broker while no worker consumes: the decoded messages, and everything."""
        self.messages = celery_messages(settings.REDIS_URL)
        self.redis_queued = Haystack(redis_dump(settings.REDIS_URL))

    @contextmanager
    def worker(self):
        with run_worker(child_process_env(self.blocker), name="leaks") as process:
            yield process

    def _pending_embeddings(self) -> int:
        with self.blocker.unblock(), connections["admin"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memories_memory WHERE embedding_status = 'pending'")
            return cursor.fetchone()[0]

    def _queued(self) -> int:
        return sum(1 for m in celery_messages(settings.REDIS_URL) if m["task"] and m["id"] not in self.stale)

    def wait_until_drained(self, timeout: float = 240, done: Callable[[], bool] = lambda: True) -> None:
        """Until every memory is embedded, no task message is left in the broker (queued or
        unacknowledged) and ``done()`` holds."""
        deadline = time.monotonic() + timeout
        while self._pending_embeddings() or self._queued() or not done():
            assert time.monotonic() < deadline, "the worker did not drain the queues"
            time.sleep(0.5)

    def collect(self) -> None:
        """Everything a value could have reached, once the worker has stopped, ready for ``where``."""
        self.http.close()
        places: dict[str, bytes | str] = {}
        with self.blocker.unblock():
            places |= {f"database {column}": text for column, text in database_text().items()}
        for name in LOGS:
            with open(log_file(name), "rb") as log:
                log.seek(self.offsets[name])
                places[f"log {name}"] = log.read()
        places |= {f"response to {label}": b"\n".join(contents) for label, contents in self.responses.items()}
        places |= {f"output of {label}": data for label, data in self.outputs.items()}
        for message in self.messages:
            text = json.dumps([message["args"], message["kwargs"], message["argsrepr"], message["kwargsrepr"]])
            places[f"celery message {message['task']} {message['id']}"] = text
        self.places = (
            {
                "redis while queued": self.redis_queued,
                "redis after the worker": Haystack(redis_dump(settings.REDIS_URL)),
            }
            | {place: Haystack(data) for place, data in places.items()}
            | self.extra
        )

    # results

    def where(self, values: Mapping[str, str]) -> dict[str, list[str]]:
        """``{place: [names of values found there]}`` over every place collected."""
        return {place: names for place, haystack in self.places.items() if (names := leaked(haystack, values))}
