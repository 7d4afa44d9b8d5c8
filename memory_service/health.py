"""Liveness and readiness probes, outside the API and its authentication."""

import time

from django.conf import settings
from django.db import connections
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from memory_service.workers import worker_heartbeat_age


def _check_database() -> dict:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"ok": True}


def _check_redis() -> dict:
    from memory_service.redis import get_redis

    get_redis().ping()
    return {"ok": True}


def _check_worker() -> dict:
    age = worker_heartbeat_age()
    if age is None:
        return {"ok": False, "detail": "no worker heartbeat"}
    ok = age <= settings.WORKER_HEARTBEAT_MAX_AGE
    return {"ok": ok, "heartbeat_age_s": round(age, 1)}


def _check_embedding() -> dict:
    from memory_service.embeddings import get_backend

    backend = get_backend()
    backend.embed_query("readiness")
    return {"ok": True, "model": backend.model_id, "dimension": backend.dimension}


def _check_pii() -> dict:
    from memory_service.pii import get_masker

    masker = get_masker()
    return {"ok": True, "tiers": sorted(masker.tiers), "version": masker.version}


READINESS_CHECKS = {
    "database": _check_database,
    "redis": _check_redis,
    "worker": _check_worker,
    "embedding": _check_embedding,
    "pii": _check_pii,
}


@require_GET
def healthz(request):
    """The process is up and serving requests."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    """200 when every dependency answers, else 503 naming the ones that do not."""
    checks = {}
    for name, check in READINESS_CHECKS.items():
        started = time.perf_counter()
        try:
            result = check()
        except Exception as exc:  # a failed dependency is reported, never raised
            result = {"ok": False, "detail": type(exc).__name__}
        result["ms"] = round((time.perf_counter() - started) * 1000, 1)
        checks[name] = result
    ready = all(check["ok"] for check in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
