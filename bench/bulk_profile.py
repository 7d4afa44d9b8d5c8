"""Where each millisecond of a bulk write's item goes: ``POST /api/v1/memories/bulk`` of 500 items,
called in process (the whole Django stack: middleware, token, view, services; no socket), with
the steps of the write path timed by wrapping their functions in this process only.

    .venv/bin/python bench/bulk_profile.py [--requests 6] [--size 500] [--out bench/results/bulk_profile.md]

Four columns, a fresh tenant each: the default policy (both tiers: regex and names) and a policy
naming only the regex tier's entity types, each with and without the masking helper process
(``PII_HELPER_PROCESS``). Requests alternate between them; the first of each is not counted. Notes
are 200–300-character English engineering notes naming one person (the generator of
``bench/_notes.py``), each unique. Commits run, so embedding tasks are published to
Redis (database 11, emptied after) and nothing consumes them.

Uses its own embedded PostgreSQL (port 54336, data in .data/bulkprofile).
"""

import argparse
import functools
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, write_section  # noqa: E402

#: (label, module path, attribute path): the steps timed, in the order of the write path.
STEPS = [
    (
        "validate each item (serializer)",
        "memory_service.memories.api.serializers",
        "MemoryInputSerializer.run_validation",
    ),
    ("mask: regex tier", "memory_service.pii.engine", "Masker._regex_spans"),
    ("mask: name tier", "memory_service.pii.engine", "Masker._find_names"),
    ("mask: this process's parts, in all", "memory_service.pii.engine", "Masker._detect_all"),
    ("mask: waiting for the helper's parts", "memory_service.pii.helper", "MaskingHelper._receive"),
    ("check, hash, take the masked values", "memory_service.memories.services", "_write_checked"),
    ("repeat lookups (external_id, dedup)", "memory_service.memories.services", "_Stored.for_writes"),
    ("build rows (search document, stems)", "memory_service.memories.services", "_new_memory"),
    ("insert memories", "memory_service.memories.services", "Memory.objects.bulk_create"),
    ("audit events", "memory_service.memories.services", "audit_events_record"),
    ("activity rows", "memory_service.memories.services", "ActivityLog.objects.bulk_create"),
    ("digest refresh lookup", "memory_service.memories.services", "refresh_after_writes"),
    ("enqueue embeddings (after commit)", "memory_service.memories.tasks", "enqueue_embedding"),
    ("response (statuses, serializer)", "memory_service.memories.api.views", "represent"),
]


def _resolve(module_path: str, attribute_path: str):
    import importlib

    owner = importlib.import_module(module_path)
    *parents, name = attribute_path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


def instrument(totals: dict) -> None:
    """Wrap each step's function so that its wall time adds to ``totals[label]`` (outermost call
    only: a recursive or nested call of the same step is not counted twice)."""
    for label, module_path, attribute_path in STEPS:
        owner, name = _resolve(module_path, attribute_path)
        original = getattr(owner, name)
        is_static = isinstance(owner, type) and isinstance(owner.__dict__.get(name), (staticmethod, classmethod))
        raw = owner.__dict__[name].__func__ if is_static else original
        depth = {"n": 0}

        def timed(*args, _raw=raw, _label=label, _depth=depth, **kwargs):
            _depth["n"] += 1
            started = time.perf_counter()
            try:
                return _raw(*args, **kwargs)
            finally:
                _depth["n"] -= 1
                if _depth["n"] == 0:
                    totals[_label] += time.perf_counter() - started

        functools.update_wrapper(timed, raw)
        if is_static:
            setattr(owner, name, type(owner.__dict__[name])(timed))
        else:
            setattr(owner, name, timed)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=6, help="counted requests per policy")
    parser.add_argument("--size", type=int, default=500, help="items per request")
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "bulk_profile.md"))
    return parser.parse_args()


def policy_clients() -> dict:
    """An in-process API client and the helper setting per column (``VARIANTS``), each with a fresh
    tenant of that column's policy."""
    from django.conf import settings
    from rest_framework.test import APIClient

    from memory_service.pii import REGEX_ENTITIES
    from tenants.masking import tenant_pii_policy_set
    from tenants.services import tenant_create, token_create

    settings.RATE_LIMIT_PER_MINUTE = 0
    settings.ALLOWED_HOSTS = ["*"]
    stamp = int(time.time())
    policies = {}
    for number, (policy, helper) in enumerate(VARIANTS.items()):
        tenant = tenant_create(slug=f"bulk-{number}-{stamp}")
        if policy.startswith("regex only"):
            tenant = tenant_pii_policy_set(tenant=tenant, entities=list(REGEX_ENTITIES))
        token = token_create(tenant=tenant, actor="system:bench", name="bench")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.raw}")
        policies[policy] = (client, helper)
    return policies


#: Columns: masking policy, and whether the masking helper process masks the parts of each batch
#: after the first (``PII_HELPER_PROCESS``, on by default on more than one core).
VARIANTS = {
    "regex + names": True,
    "regex + names, one process": False,
    "regex only": True,
    "regex only, one process": False,
}


def wait_for_the_helper() -> None:
    """Start this process's masking helper and wait until it has loaded (a few seconds)."""
    from memory_service.pii import get_masker
    from memory_service.pii.helper import shared_helper

    deadline = time.monotonic() + 120
    while shared_helper().state(get_masker().version) != "ready":
        if time.monotonic() > deadline:
            raise SystemExit("the masking helper did not load in 120 s")
        time.sleep(0.2)


def profile(args, policies: dict) -> tuple[dict, dict, dict]:
    """Bulk requests alternating the policies (the first round not counted), each step timed: the
    steps' seconds, each request's seconds and the items counted, by policy."""
    from bench._notes import make_note

    totals = {policy: defaultdict(float) for policy in policies}
    request_s = {policy: [] for policy in policies}
    items_done = {policy: 0 for policy in policies}
    current: dict = defaultdict(float)
    instrument(current)
    from django.conf import settings

    rng = random.Random(20261204)
    n = 0
    wait_for_the_helper()
    for round_ in range(args.requests + 1):
        for policy, (client, helper) in policies.items():
            settings.PII_HELPER_PROCESS = helper
            items = []
            for _ in range(args.size):
                title, text = make_note(rng, "en", n)
                items.append({"scope": "user", "user": "u1", "kind": "note", "title": title, "text": text,
                              "tags": ["bench"]})  # fmt: skip
                n += 1
            current.clear()
            started = time.perf_counter()
            response = client.post("/api/v1/memories/bulk", {"items": items}, format="json")
            seconds = time.perf_counter() - started
            statuses = {r["status"] for r in response.json()["results"]} if response.status_code == 200 else {}
            assert statuses == {201}, (response.status_code, statuses)
            print(f"{policy}: {args.size} items in {seconds:.2f} s ({args.size / seconds:.0f}/s)", flush=True)
            if round_ == 0:
                continue
            request_s[policy].append(seconds)
            items_done[policy] += args.size
            for label, value in current.items():
                totals[policy][label] += value
    return totals, request_s, items_done


def section(args, policies, totals, request_s, items_done) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The RESULTS.md section and the headline figures of a run."""
    lines = [
        "### Bulk write: where an item's time goes",
        "",
        f"Command: `.venv/bin/python bench/bulk_profile.py --requests {args.requests} --size {args.size}` — "
        f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores. `POST /api/v1/memories/bulk` of "
        f"{args.size} English notes (200–300 characters, one person named in each) called in process "
        "(middleware, token, view, services, commit; no socket), alternating the columns, "
        f"{args.requests} requests each after one not counted. Steps are timed by wrapping their "
        "functions; a nested step's time is also inside its parent's (the tiers inside \"this "
        "process's parts\"). A request is masked and stored in four parts (`helper.part_ranges`); with "
        "the masking helper (`PII_HELPER_PROCESS`, the default on two cores) this process masks the "
        "first and the helper the others while this process stores each part, so the mask rows time "
        "this process's part and its waits for the helper's.",
        "",
        "| step | " + " | ".join(f"{p}: ms per item" for p in policies) + " |",
        "|---|" + "---|" * len(policies),
    ]
    for label, _module, _attribute in STEPS:
        cells = [f"{totals[p][label] * 1000 / items_done[p]:.3f}" for p in policies]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    whole = {p: sum(request_s[p]) * 1000 / items_done[p] for p in policies}
    top = {p: sum(v for k, v in totals[p].items() if k not in NESTED) * 1000 / items_done[p] for p in policies}
    lines.append("| everything else (HTTP layer, token, transaction, JSON) | "
                 + " | ".join(f"{whole[p] - top[p]:.3f}" for p in policies) + " |")  # fmt: skip
    lines.append("| **whole request, per item** | " + " | ".join(f"**{whole[p]:.3f}**" for p in policies) + " |")
    rates = [f"{args.size / statistics.median(request_s[p]):.0f}" for p in policies]
    lines.append("| items per second (median request) | " + " | ".join(rates) + " |")
    figures = [
        (
            f"bulk write in process ({args.size} notes a request), {policy}: time per item",
            f"{whole[policy]:.2f} ms ({rate} items/s)",
            "",
        )
        for policy, rate in zip(policies, rates, strict=True)
    ]
    return lines + [""], figures


def main() -> None:
    args = parse_args()
    with bench_stack("bulkprofile", pg_port=54336, redis_db=11):
        from memory_service.redis import get_redis

        policies = policy_clients()
        totals, request_s, items_done = profile(args, policies)
        get_redis().flushdb()
        lines, figures = section(args, policies, totals, request_s, items_done)
        write_section(args.out, lines, figures)


#: Steps timed inside another step (not added again to the request's total).
NESTED = {"mask: regex tier", "mask: name tier"}


if __name__ == "__main__":
    main()
