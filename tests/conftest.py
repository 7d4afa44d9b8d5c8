from contextlib import contextmanager

import pytest
from rest_framework.test import APIClient

from tenants.models import Permission
from tests.factories import make_tenant, make_token

ALL_PERMISSIONS = list(Permission.values)


@pytest.fixture(autouse=True)
def audit_checkpoint_dir(settings, tmp_path):
    """Each test keeps its audit checkpoints in a directory of its own (the file store's default)."""
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "audit-checkpoints"
    return settings.AUDIT_CHECKPOINT_DIR


@pytest.fixture
def tenant(db):
    return make_tenant("acme")


@pytest.fixture
def other_tenant(db):
    return make_tenant("charlie")


@pytest.fixture
def token(tenant):
    """A raw token of ``tenant`` with every permission."""
    return make_token(tenant, permissions=ALL_PERMISSIONS).raw


@pytest.fixture
def other_token(other_tenant):
    return make_token(other_tenant, permissions=ALL_PERMISSIONS).raw


def client_for(raw_token: str | None) -> APIClient:
    client = APIClient()
    if raw_token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_token}")
    return client


@pytest.fixture
def api_client(token):
    """A client authenticated as ``tenant`` with every permission."""
    return client_for(token)


@pytest.fixture
def other_client(other_token):
    """A client of another tenant (the "charlie" of isolation tests)."""
    return client_for(other_token)


@pytest.fixture
def anonymous_client():
    return APIClient()


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker):
    """Create and migrate the test database through the ``admin`` alias (the schema owner).

    pytest-django would set up only the aliases tests ask for, and ``default`` is a mirror of
    ``admin`` (same database, the application's role); so ``admin`` is always created here.
    """
    from django.db import connections
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        db_cfg = setup_databases(
            verbosity=request.config.option.verbose,
            interactive=False,
            aliases={"admin", "default"},
            serialized_aliases=set(),
        )
    yield
    with django_db_blocker.unblock():
        connections.close_all()
        for connection in connections.all():
            connection.close_pool()
        teardown_databases(db_cfg, verbosity=request.config.option.verbose)


def database_url(alias: str) -> str:
    """A URL for the test database as ``alias`` sees it (for processes started by tests)."""
    from urllib.parse import quote

    from django.db import connections

    s = connections[alias].settings_dict
    return f"postgres://{s['USER']}:{quote(s['PASSWORD'], safe='')}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


WORKER_QUEUES = "celery,exports,rescore"


def purge_queues() -> None:
    """Drop messages queued by earlier tests, on every queue the test workers consume."""
    from memory_service.celery import app

    with app.connection_for_write() as connection:
        for queue in WORKER_QUEUES.split(","):
            connection.default_channel.queue_purge(queue)


def log_file(name: str):
    import os
    from pathlib import Path

    path = Path(os.environ.get("ENV_FILE", ".data/test/env")).parent / "logs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def broker_app(broker_url: str):
    """A Celery client of another broker that never becomes the current app (tasks stay on ours)."""
    from celery import Celery

    return Celery(broker=broker_url, set_as_current=False)


def start_worker_process(
    *, name: str, extra_env: dict | None = None, concurrency: int = 2, env: dict | None = None,
    broker_url: str | None = None,
):  # fmt: skip
    """Start a real Celery worker process consuming every queue; returns it once it answers a ping.

    ``env`` defaults to this process's environment on the test database (call it with the
    database unblocked then); ``broker_url`` is where it is pinged (the test broker by default).
    The worker gets its own process group, so that a test can kill it with its pool processes.
    """
    import os
    import subprocess
    import sys
    import time

    from memory_service.celery import app

    if env is None:
        env = os.environ | {"DATABASE_URL": database_url("default"), "ADMIN_DATABASE_URL": database_url("admin")}
    env = env | (extra_env or {})
    pinger = broker_app(broker_url) if broker_url else app
    log_path = log_file("worker.log")
    hostname = f"{name}-{os.getpid()}-{time.monotonic_ns()}@localhost"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memory_service", "worker", "--loglevel", "INFO",
             "--concurrency", str(concurrency), "--without-gossip", "--without-mingle", "-Q", WORKER_QUEUES,
             "--hostname", hostname],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while not pinger.control.ping(destination=[hostname], timeout=0.5):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the test worker did not start; see {log_path}")
    return process


@contextmanager
def run_worker(env: dict, *, name: str, broker_url: str | None = None):
    """``start_worker_process`` for the duration of a block; the worker is stopped at the end."""
    process = start_worker_process(name=name, env=env, broker_url=broker_url)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


@contextmanager
def serve_app(env: dict):
    """The whole ASGI application (REST, MCP, admin) under uvicorn on a free loopback port; yields its URL."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = env | {
        "DJANGO_SETTINGS_MODULE": "memory_service.settings.base",
        "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
    }
    log_path = log_file("web.log")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "memory_service.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), "--no-access-log"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=1)  # noqa: S310
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the test web server did not start; see {log_path}") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def child_process_env(django_db_blocker) -> dict:
    """The environment of a process started by a test: this process's, on the test database."""
    import os

    with django_db_blocker.unblock():
        return os.environ | {"DATABASE_URL": database_url("default"), "ADMIN_DATABASE_URL": database_url("admin")}


@pytest.fixture(scope="module")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real Celery worker process on the test broker and the test database, for one test module,
    consuming every queue (``celery``, ``exports``).

    Queued messages left by earlier tests are purged first.
    """
    purge_queues()
    with run_worker(child_process_env(django_db_blocker), name="test") as process:
        yield process


@pytest.fixture(scope="module")
def live_server_url(django_db_setup, django_db_blocker):
    """The whole ASGI application (REST, MCP, admin) served by uvicorn on a free loopback port,
    against the test database. Tests that use it write committed data (transaction=True)."""
    import subprocess
    import sys

    env = child_process_env(django_db_blocker) | {"DJANGO_SETTINGS_MODULE": "memory_service.settings.base"}
    # The admin's assets, as production serves them (whitenoise, hashed names).
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], env=env, check=True)
    with serve_app(env) as url:
        yield url
