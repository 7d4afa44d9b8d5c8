"""The benchmark's own stack: embedded PostgreSQL on 54330 (.data/bench), Redis db 5, uvicorn on 8030.

Reuses ``dev.stack``; never touches the ``run``/``test`` profiles, their ports or
their Redis databases.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from psycopg.conninfo import make_conninfo

from dev import stack as devstack

# Data, logs and env file stay under this checkout's .data/bench even when the application code
# comes from a frozen copy (BENCH_APP_DIR); uvicorn and Celery run from APP_DIR.
BASE_DIR = Path(__file__).resolve().parents[2]
APP_DIR = Path(devstack.__file__).resolve().parent.parent
devstack.BASE_DIR = BASE_DIR
devstack.DATA_DIR = BASE_DIR / ".data"
PG_PORT = 54330
REDIS_URL = "redis://127.0.0.1:6379/5"
WEB_PORT = 8030
PROFILE = devstack.Profile(
    name="bench", pg_port=PG_PORT, redis_url=REDIS_URL, valkey_port=63795, env_file=devstack.DATA_DIR / "bench" / "env"
)
LOG_DIR = PROFILE.dir / "logs"
TOKENS_FILE = PROFILE.dir / "tokens.json"


HUGE_PAGES = Path("/proc/sys/vm/nr_hugepages")
HUGE_PAGES_RESERVED = PROFILE.dir / "huge_pages_reserved"
HUGE_PAGE_MB = 2


def reserve_huge_pages() -> str:
    """Reserve 2 MB huge pages for PostgreSQL's shared memory before it starts, where this process
    may (root); PostgreSQL's ``huge_pages = try`` then maps its shared buffers with them.

    Why: with 4 kB pages every connection takes a page fault on its first touch of each page of
    shared buffers, so at 1M memories a search's first touch of a scope cost a multiple of its warm
    time (measured in bench/perf/analysis.md). Dedicated PostgreSQL servers with large shared buffers are set
    up this way. ``release_huge_pages`` gives them back. Returns what was done, for the results.
    """
    if devstack.pg_is_running(PROFILE.pgdata):
        return "server already running: left as it is"
    wanted = (devstack.shared_buffers_mb() * 106 // 100 + 64) // HUGE_PAGE_MB
    try:
        before = int(HUGE_PAGES.read_text())
        if before >= wanted:
            return f"{before} huge pages were already reserved"
        HUGE_PAGES.write_text(str(wanted))
        got = int(HUGE_PAGES.read_text())
    except (OSError, ValueError) as exc:
        return f"could not reserve huge pages ({type(exc).__name__}): 4 kB pages"
    HUGE_PAGES_RESERVED.write_text(str(before))
    return f"reserved {got} huge pages of {HUGE_PAGE_MB} MB (asked {wanted}, before {before})"


def release_huge_pages() -> None:
    """Give back what ``reserve_huge_pages`` reserved (after the server stopped)."""
    if HUGE_PAGES_RESERVED.exists():
        with contextlib.suppress(OSError):
            HUGE_PAGES.write_text(HUGE_PAGES_RESERVED.read_text())
        HUGE_PAGES_RESERVED.unlink()


def start_database(*, huge_pages: bool = True) -> dict:
    """Start (or reuse) the bench PostgreSQL and Redis db 5, write the env file. Returns URLs and flags."""
    for forbidden in (54320, 54321, 8000):
        assert forbidden not in (PG_PORT, WEB_PORT)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    os.environ.pop("DATABASE_URL", None)  # devstack would otherwise use an outside server
    huge = reserve_huge_pages() if huge_pages else "not asked for (--no-huge-pages)"
    step = devstack.Steps(3)
    values = devstack.load_secrets(PROFILE)
    app_url, owner_url, pg_started = devstack.ensure_postgres(PROFILE, values, step)
    redis_url, valkey = devstack.ensure_redis(PROFILE, step, LOG_DIR)
    if valkey is not None:
        raise SystemExit("Redis at 127.0.0.1:6379 did not answer; the benchmark expects it (db 5)")
    step(f"Writing {PROFILE.env_file.relative_to(BASE_DIR)}")
    settings = devstack.common_settings(values, app_url, owner_url, redis_url) | {
        "STORAGE_DIR": str(PROFILE.dir / "storage"),
        "STATIC_ROOT": str(PROFILE.dir / "static"),
        "LOG_LEVEL": "WARNING",
    }
    devstack.write_env_file(PROFILE.env_file, settings)
    (PROFILE.dir / "static").mkdir(exist_ok=True)
    return {
        "app_url": app_url,
        "owner_url": owner_url,
        "redis_url": redis_url,
        "pg_started": pg_started,
        "huge_pages": huge,
        "superuser_password": values["superuser_password"],
        "superuser_url": make_conninfo(owner_url, user="postgres", password=values["superuser_password"]),
    }


def setup_django() -> None:
    os.environ["ENV_FILE"] = str(PROFILE.env_file)
    os.environ["DJANGO_SETTINGS_MODULE"] = "memory_service.settings.base"
    if str(APP_DIR) not in sys.path:
        sys.path.insert(0, str(APP_DIR))
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def ensure_tenants(specs) -> dict[str, dict]:
    """One tenant and one unbound read/write token per spec; tokens kept in .data/bench/tokens.json."""
    from tenants.context import platform_context
    from tenants.models import Tenant
    from tenants.services import tenant_create, token_create

    known = json.loads(TOKENS_FILE.read_text()) if TOKENS_FILE.exists() else {}
    for spec in specs:
        if spec.slug in known:
            continue
        with platform_context():
            tenant = Tenant.objects.filter(slug=spec.slug).first()
            if tenant is None:
                tenant = tenant_create(slug=spec.slug, name=spec.slug)
            issued = token_create(
                tenant=tenant, actor="system:bench", name="bench", permissions=["memory:read", "memory:write"]
            )
        known[spec.slug] = {"tenant_id": str(tenant.id), "token": issued.raw}
        TOKENS_FILE.write_text(json.dumps(known, indent=1))
        TOKENS_FILE.chmod(0o600)
    return known


def start_web(extra_env: dict | None = None, app_dir: Path = APP_DIR, port: int = WEB_PORT) -> subprocess.Popen:
    """uvicorn on ``port`` (WEB_PORT) serving the application in ``app_dir``, once it answers /healthz."""
    if port in (54320, 54321, 8000, PG_PORT):
        raise SystemExit(f"port {port} belongs to another stack")
    if devstack.port_is_open(port):
        raise SystemExit(f"port {port} is taken")
    bin_dir = Path(sys.executable).parent
    env = (
        os.environ
        | {
            "ENV_FILE": str(PROFILE.env_file),
            "DJANGO_SETTINGS_MODULE": "memory_service.settings.base",
            "OMP_WAIT_POLICY": "PASSIVE",
        }
        | (extra_env or {})
    )
    log = open(LOG_DIR / "web.log", "ab")  # noqa: SIM115 (closed with the process)
    process = subprocess.Popen(
        [
            str(bin_dir / "uvicorn"),
            "memory_service.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-config",
            str(app_dir / "memory_service" / "uvicorn_logging.json"),
        ],
        cwd=app_dir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"uvicorn exited; see {LOG_DIR / 'web.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):  # noqa: S310
                return process
        except OSError:
            time.sleep(0.3)
    stop_process(process)
    raise SystemExit("uvicorn did not answer /healthz within 60 s")


def wait_for_masking_helper(port: int = WEB_PORT, timeout: float = 90.0) -> str:
    """Wait until the web server's masking helper has loaded (``/readyz``: ``pii.helper`` "ready",
    or "off" where there is none), so that timed bulk writes do not run while it loads; its state."""
    deadline = time.monotonic() + timeout
    state = "unknown"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:  # noqa: S310
                body = response.read()
        except urllib.error.HTTPError as unavailable:  # 503 without a worker: the checks still come
            body = unavailable.read()
        except OSError:
            body = b"{}"
        try:
            state = json.loads(body)["checks"]["pii"].get("helper", "off")
        except (ValueError, KeyError):
            state = "unknown"
        if state in ("ready", "off"):
            return state
        time.sleep(0.5)
    raise SystemExit(f"the masking helper did not load within {timeout:.0f} s (state: {state})")


def start_worker() -> subprocess.Popen:
    """One Celery worker process (prefork, concurrency 1) on the bench Redis db."""
    bin_dir = Path(sys.executable).parent
    env = os.environ | {
        "ENV_FILE": str(PROFILE.env_file),
        "DJANGO_SETTINGS_MODULE": "memory_service.settings.base",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    log = open(LOG_DIR / "worker.log", "ab")  # noqa: SIM115
    return subprocess.Popen(
        [
            str(bin_dir / "celery"),
            "-A",
            "memory_service",
            "worker",
            "--loglevel",
            "WARNING",
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            "bench-worker@%h",
        ],
        cwd=APP_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_process(process: subprocess.Popen | None) -> None:
    """Stop a process group we started (by its own id)."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def database():
    """The bench PostgreSQL running (started if it was not) with Django set up; its facts as
    ``start_database`` gives them. Stopped again at the end if this started it."""
    env = start_database()
    try:
        setup_django()
        yield env
    finally:
        if env["pg_started"]:
            from django.db import connections

            connections.close_all()
            stop_database()


def stop_database() -> None:
    devstack.pg_stop(PROFILE)
    release_huge_pages()


def flush_redis_db() -> None:
    """Empty Redis db 5 (ours) of the benchmark's queued tasks."""
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
