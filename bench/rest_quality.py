"""Retrieval quality through the REST API, measured as a client outside the service measures it.

    .venv/bin/python bench/rest_quality.py [--minute-apart] [--out PATH]

What the external long-conversation benchmark does, on the project's own sets: the life chats
written through ``POST /api/v1/memories/bulk`` (up to 500 items a request), every turn one user-scope
memory "<speaker>: <text>" with its session's date as ``occurred_at`` (``--minute-apart``: each
turn a minute after the one before, as ``retrieval_quality`` writes them); the bilingual notes in
their repository's scope and again in user "all"'s, replacements with their ``supersedes`` links.
One tenant masking with pseudonyms and one token (``memory:read``, ``memory:write``) as a
deployment issues them; one uvicorn process serves the application and one Celery worker process
embeds what was written. Every question is then asked through ``POST /api/v1/search`` (``top``
10) and scored on the answer's first 10 ``items`` as a client reads them, RECENT additions
included; a search answered ``degraded`` (words only) or a memory the worker failed to embed stops
the run. The same questions are also asked in process (``memory_search`` with an operator's
principal, RECENT additions left out, as ``retrieval_quality`` asks them) over the same stored
memories: a difference between the two rows is the HTTP path's and the RECENT additions'.

Uses its own embedded PostgreSQL (port 54343, data in .data/restquality), Redis database 14 and
port 8041.
"""

import argparse
import logging
import os
import random
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench._quality import (  # noqa: E402
    TOP,
    Question,
    cell,
    evaluate,
    load_bilingual,
    load_life_chats,
    pseudonym_tenant,
    scores,
    table,
)
from bench._stack import bench_stack, start_celery_worker, start_uvicorn, write_section  # noqa: E402
from bench._stats import percentiles  # noqa: E402
from bench.update_results import RESULTS_DIR  # noqa: E402

PORT = 8041
EMBEDDED_WITHIN_S = 900


def rest_store(http):
    """A ``store`` for ``_quality``'s loaders: ``items`` (``memory_create`` arguments) sent through
    ``POST /api/v1/memories/bulk``, ``request_size`` a request; external id → memory id. Raises on
    any item the service refused."""

    def store(_principal, items: list[dict], request_size: int) -> dict:
        ids = {}
        for start in range(0, len(items), request_size):
            chunk = items[start : start + request_size]
            response = http.post("/api/v1/memories/bulk", json={"items": [_as_json(i) for i in chunk]})
            response.raise_for_status()
            for item, result in zip(chunk, response.json()["results"], strict=True):
                if result["status"] not in (200, 201):
                    raise RuntimeError(f"{item['external_id']} refused: {result}")
                ids[item["external_id"]] = uuid.UUID(result["memory"]["id"])
        return ids

    return store


def _as_json(item: dict) -> dict:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in item.items()}


def stored_count(tenant) -> int:
    from memory_service.memories.models import Memory
    from tenants.context import tenant_context

    with tenant_context(tenant.id):
        return Memory.objects.filter(tenant=tenant).count()


def wait_until_embedded(tenant_id, expected: int) -> float:
    """Seconds until the worker has embedded all of the tenant's memories; progress printed."""
    from memory_service.memories.embedding import pending_memory_ids
    from memory_service.memories.models import EmbeddingStatus, Memory
    from tenants.context import tenant_context

    started = time.perf_counter()
    while True:
        with tenant_context(tenant_id):
            pending = len(pending_memory_ids(tenant_id=str(tenant_id), limit=expected))
            failed = Memory.objects.filter(tenant_id=tenant_id, embedding_status=EmbeddingStatus.FAILED).count()
        elapsed = time.perf_counter() - started
        print(f"  {expected - pending} of {expected} embedded after {elapsed:.0f} s", flush=True)
        if failed:
            raise RuntimeError(f"the worker failed to embed {failed} memories")
        if not pending:
            return elapsed
        if elapsed > EMBEDDED_WITHIN_S:
            raise RuntimeError(f"{pending} memories still pending after {EMBEDDED_WITHIN_S} s")
        time.sleep(1)


def ask_over_http(http, questions: list[Question]) -> tuple[dict, list[float]]:
    """question id → scores of the first ``TOP`` ``items`` that ``POST /api/v1/search`` answers, in
    their order; and each request's milliseconds. Raises on an answer ranked by words alone."""
    found, latencies = {}, []
    for question in questions:
        started = time.perf_counter()
        response = http.post("/api/v1/search", json={"query": question.text, "top": TOP, **question.where})
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        answer = response.json()
        if answer["degraded"]:
            raise RuntimeError(f"{question.id}: the query was not embedded (degraded)")
        ranked = [uuid.UUID(item["id"]) for item in answer["items"][:TOP]]
        found[question.id] = scores(ranked, question)
    return found, latencies


@contextmanager
def serving(log_dir: Path, pseudonym_keys: str):
    """One embedding worker process (on an emptied queue) and one uvicorn process, both ended on
    leaving, whatever happens."""
    from memory_service.celery import app

    app.control.purge()
    options = ["--loglevel", "WARNING", "--concurrency", "1", "--without-gossip", "--without-mingle",
               "--hostname", "restquality@%h"]  # fmt: skip
    env = {"PII_PSEUDONYM_KEYS": pseudonym_keys}
    with ExitStack() as processes:
        worker = start_celery_worker(options, env=env, log_path=log_dir / "worker.log")
        processes.callback(_end, worker)
        web_env = env | {"PUBLIC_BASE_URL": f"http://127.0.0.1:{PORT}", "RATE_LIMIT_PER_MINUTE": "0"}
        processes.callback(_end, start_uvicorn(PORT, env=web_env))
        yield


def _end(process) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def report(args, chats, bilingual, rows: dict, facts: dict, rng) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The section's lines and its headline figures (held-out halves, over HTTP)."""
    http_chats, http_bilingual = rows["over HTTP (`POST /api/v1/search`, items as answered)"]
    written = "a minute after the one before" if args.minute_apart else "its session's date"
    lines = [
        "### Retrieval quality through the REST API",
        "",
        f"Command: `.venv/bin/python bench/rest_quality.py{' --minute-apart' if args.minute_apart else ''}` — "
        f"{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores. Each life-chat turn written at "
        f"{written}; {facts['memories']} memories written through `POST /api/v1/memories/bulk` in "
        f"{facts['write_s']:.0f} s, embedded by one worker process {facts['embed_s']:.0f} s after the last "
        f"write; {facts['searches']} searches over HTTP, p50 {facts['p50']:.1f} / p95 {facts['p95']:.1f} ms "
        "(one client, sequential).",
        "",
    ]
    lines += table("Life chats through REST", {m: r[0] for m, r in rows.items()}, chats, rng, by_kind=True)
    lines += table("Bilingual notes through REST", {m: r[1] for m, r in rows.items()}, bilingual, rng, by_kind=True)
    held_chats = [q for q in chats if q.split == "heldout"]
    held_bilingual = [q for q in bilingual if q.split == "heldout"]
    superseded = [q for q in bilingual if q.current is not None]
    above = sum(http_bilingual[q.id]["replaced above current"] for q in superseded)
    figures = [
        (
            f"long two-person conversations (`life_chats`), held-out half ({len(held_chats)} questions), "
            f"through REST: each turn written at {written}, `POST /api/v1/search`",
            f"R@10 {cell([http_chats[q.id]['R@10'] for q in held_chats], rng)}",
            "external benchmark ≥ 0.65 (measured outside the project)",
        ),
        (
            f"bilingual notes (EN/JA), held-out half ({len(held_bilingual)} questions), through REST",
            f"MRR {cell([http_bilingual[q.id]['MRR'] for q in held_bilingual], rng)}; "
            f"a replaced decision above its replacement {above:.0f} of {len(superseded)}",
            "external set ≥ 0.92 (measured outside the project)",
        ),
    ]
    return lines, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minute-apart", action="store_true", help="each turn at a minute after the one before")
    parser.add_argument("--pg-port", type=int, default=54343)
    parser.add_argument("--out", default=str(RESULTS_DIR / "rest_quality.md"))
    args = parser.parse_args()
    rng = random.Random(20261206)
    with bench_stack("restquality", pg_port=args.pg_port, redis_db=14) as profile:
        import httpx

        logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
        from django.conf import settings

        from tenants.services import token_create

        tenant, principal = pseudonym_tenant("rest-quality")
        token = token_create(tenant=tenant, actor="system:bench", name="bench",
                             permissions=["memory:read", "memory:write"])  # fmt: skip
        headers = {"Authorization": f"Bearer {token.raw}"}
        url = f"http://127.0.0.1:{PORT}"
        with (
            serving(profile.dir / "logs", settings.PII_PSEUDONYM_KEYS),
            httpx.Client(base_url=url, headers=headers, timeout=120) as http,
        ):
            store = rest_store(http)
            started = time.perf_counter()
            chats = load_life_chats(principal, session_time=not args.minute_apart, store=store)
            bilingual = load_bilingual(principal, principal, store=store)
            facts = {"write_s": time.perf_counter() - started, "memories": stored_count(tenant)}
            facts["embed_s"] = wait_until_embedded(tenant.id, facts["memories"])
            http_chats, chat_ms = ask_over_http(http, chats)
            http_bilingual, bilingual_ms = ask_over_http(http, bilingual)
        p50, p95, _ = percentiles(chat_ms + bilingual_ms)
        facts |= {"searches": len(chat_ms) + len(bilingual_ms), "p50": p50, "p95": p95}
        principals = {tenant.id: principal}
        rows = {
            "over HTTP (`POST /api/v1/search`, items as answered)": (http_chats, http_bilingual),
            "in process (`memory_search`, the same memories)": (
                evaluate(principals, chats, None),
                evaluate(principals, bilingual, None),
            ),
        }
        lines, figures = report(args, chats, bilingual, rows, facts, rng)
        write_section(args.out, lines + [""], figures)


if __name__ == "__main__":
    main()
