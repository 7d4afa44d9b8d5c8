"""Liveness and readiness probes and Prometheus metrics, outside the API and its authentication.

What they tell depends on who asks: metrics and the readiness details (which dependency failed,
models, versions, timings) go only to loopback clients and to holders of ``METRICS_TOKEN``; anyone
else learns from ``/readyz`` whether the service is ready, and nothing from ``/metrics``.
"""

import hmac
import ipaddress
import threading
import time

from django.conf import settings
from django.db import connections
from django.http import JsonResponse
from django.views.decorators.http import require_GET
from django_prometheus.exports import ExportToDjangoView

from memory_service.exceptions import PermissionDeniedError, error_response
from memory_service.workers import worker_heartbeat_age


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return (mapped or ip).is_loopback


def is_operator(request) -> bool:
    """Whether the caller may see metrics and readiness details: a loopback client
    (``REMOTE_ADDR``), or ``Authorization: Bearer <METRICS_TOKEN>`` when that setting is set."""
    if _is_loopback(request.META.get("REMOTE_ADDR", "")):
        return True
    expected = settings.METRICS_TOKEN
    scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(presented.encode(), expected.encode())


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


def _probe_embedding() -> dict:
    from memory_service.embeddings import get_backend
    from memory_service.embeddings.backends import get_rescore_backend

    try:
        backend = get_backend()
        backend.embed_query("readiness")
        rescorer = get_rescore_backend()
    except Exception as exc:  # a failed dependency is reported, never raised
        return {"ok": False, "detail": type(exc).__name__}
    outcome = {"ok": True, "model": backend.model_id, "dimension": backend.dimension}
    return outcome | ({"rescore_model": rescorer.model_id} if rescorer is not None else {})


_embedding_probe_lock = threading.Lock()
_embedding_probe: tuple[float, dict] | None = None  # (when, outcome) of the last probe


def _check_embedding() -> dict:
    """The embedding backend embeds a query. The outcome, failure included, is reused for
    READINESS_EMBEDDING_CACHE_SECONDS: frequent probes never cost an embedding each, and
    concurrent ones wait for the one probe in flight."""
    global _embedding_probe
    with _embedding_probe_lock:
        now = time.monotonic()
        if _embedding_probe is None or now - _embedding_probe[0] >= settings.READINESS_EMBEDDING_CACHE_SECONDS:
            _embedding_probe = (now, _probe_embedding())
        return dict(_embedding_probe[1])


def _check_pii() -> dict:
    from memory_service.pii import get_masker
    from memory_service.pii.helper import shared_helper

    masker = get_masker()
    helper = "off"
    if settings.PII_HELPER_PROCESS:  # an optimisation: its state never makes the service unready
        helper = shared_helper().state(masker.version)
    return {
        "ok": True,
        "tiers": sorted(masker.tiers),
        "name_languages": sorted(masker.ner_languages),
        "version": masker.version,
        "helper": helper,
    }


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
    """200 when every dependency answers, else 503. Operators (``is_operator``) get each check's
    outcome; anyone else only ``{"status": "ok"}`` or ``{"status": "unavailable"}``."""
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
    body = {"status": "ok" if ready else "unavailable"}
    if is_operator(request):
        body["checks"] = checks
    return JsonResponse(body, status=200 if ready else 503)


@require_GET
def metrics(request):
    """Prometheus metrics for operators (``is_operator``); 403 for anyone else."""
    if not is_operator(request):
        message = "Metrics are served to loopback clients and to the metrics token."
        return error_response(PermissionDeniedError.code, message, 403)
    return ExportToDjangoView(request)
