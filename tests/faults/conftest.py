"""What fault tests break: their own Redis-compatible server, worker, database and embedding API.

Never the machine's shared Redis or the suite's database.
"""

import json
import os
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dev import stack as devstack


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateRedis:
    """A valkey-server of our own, that a test may stop and start again on the same port."""

    def __init__(self):
        port = free_port()
        self.profile = devstack.Profile(
            name="test-faults", pg_port=0, redis_url="", valkey_port=port, env_file=devstack.DATA_DIR / "test-faults"
        )
        self.url = f"redis://127.0.0.1:{port}/0"
        self.log_dir = self.profile.dir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.process = None

    def start(self) -> None:
        self.process = devstack.start_valkey(self.profile, self.log_dir)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


@pytest.fixture
def private_redis():
    redis = PrivateRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


class FakeEmbeddingApi:
    """An OpenAI-compatible ``/v1/embeddings`` outside the system, for the worker to call.

    The first request hangs until ``release`` is set (a task that is busy when its worker dies);
    later ones answer at once with 8-d vectors.
    """

    DIMENSION = 8

    def __init__(self):
        self.requests = 0
        self.first_request = threading.Event()
        self.release = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests += 1
                if api.requests == 1:
                    api.first_request.set()
                    api.release.wait(30)
                vectors = [[1.0] + [0.0] * (api.DIMENSION - 1) for _ in body["input"]]
                payload = json.dumps({"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def settings(self) -> dict:
        return {"EMBEDDING_BACKEND": "openai", "EMBEDDING_URL": self.url, "EMBEDDING_MODEL": "fake",
                "EMBEDDING_DIMENSION": str(self.DIMENSION), "EMBEDDING_TIMEOUT": "60"}  # fmt: skip


@pytest.fixture
def fake_embedding_api():
    api = FakeEmbeddingApi()
    api.thread.start()
    try:
        yield api
    finally:
        api.release.set()
        api.server.shutdown()


class PrivatePostgres:
    """An embedded PostgreSQL of our own (data under ``.data/test-pgfault``), migrated, restartable."""

    def __init__(self):
        self.profile = devstack.Profile(
            name="test-pgfault", pg_port=free_port(), redis_url="", valkey_port=0,
            env_file=devstack.DATA_DIR / "test-pgfault" / "env",
        )  # fmt: skip
        values = devstack.load_secrets(self.profile)
        if not (self.profile.pgdata / "PG_VERSION").exists():
            devstack.pg_init(self.profile, values["superuser_password"])
        devstack.pg_stop(self.profile)  # left running by an interrupted run, maybe on another port
        devstack.pg_start(self.profile)
        devstack.pg_bootstrap(self.profile, values)
        self.app_url = devstack.pg_url(devstack.APP_ROLE, values["app_password"], self.profile.pg_port)
        self.owner_url = devstack.pg_url(devstack.OWNER_ROLE, values["owner_password"], self.profile.pg_port)

    def start(self) -> None:
        devstack.pg_start(self.profile)

    def stop(self) -> None:
        devstack.pg_stop(self.profile)

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash or the kernel's OOM killer would: no shutdown
        checkpoint; its backends notice and exit; the next ``start`` runs crash recovery."""
        pid = int((self.profile.pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def private_postgres():
    postgres = PrivatePostgres()
    try:
        yield postgres
    finally:
        postgres.stop()
