"""A private embedded stack for benchmarks: own PostgreSQL data dir and port, own Redis database.

with bench_stack("quality", pg_port=54331, redis_db=6):
    ...  # Django is set up, migrated, on a fresh database; the app role under RLS is `default`
"""

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from bench.update_results import pin_run_code
from dev import stack as devstack


@contextmanager
def bench_stack(name: str, *, pg_port: int, redis_db: int):
    profile = devstack.Profile(
        name=name,
        pg_port=pg_port,
        redis_url=f"redis://127.0.0.1:6379/{redis_db}",
        valkey_port=pg_port + 10000,
        env_file=devstack.DATA_DIR / name / "env",
    )
    log_dir = profile.dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    pin_run_code()  # the figures name the code the run started from
    step = devstack.Steps(3)
    values = devstack.load_secrets(profile)
    database_url, admin_url, started = devstack.ensure_postgres(profile, values, step)
    redis_url, valkey = devstack.ensure_redis(profile, step, log_dir)
    try:
        step("Recreating the benchmark database")
        _recreate_database(profile, values)
        settings = devstack.common_settings(values, database_url, admin_url, redis_url)
        devstack.write_env_file(profile.env_file, settings | {"STORAGE_DIR": str(profile.dir / "storage")})
        os.environ["ENV_FILE"] = str(profile.env_file)
        os.environ["DJANGO_SETTINGS_MODULE"] = "memory_service.settings.base"
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", interactive=False, verbosity=0)
        yield profile
    finally:
        from django.db import connections

        connections.close_all()
        for connection in connections.all():
            connection.close_pool()
        if valkey is not None:
            valkey.terminate()
        if started:
            devstack.pg_stop(profile)


def _recreate_database(profile, values) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(
        host="127.0.0.1", port=profile.pg_port, user="postgres", password=values["superuser_password"],
        dbname="postgres", autocommit=True,
    ) as conn:  # fmt: skip
        name = sql.Identifier(devstack.DATABASE_NAME)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(name, sql.Identifier(devstack.OWNER_ROLE)))


def write_section(path, lines: list[str], figures: list[tuple[str, str, str]] = ()) -> None:
    """Write a benchmark's RESULTS.md section to ``path`` and print it; and, next to it
    (``<name>.json``), its headline ``figures`` — (what, figure, target) rows — with the commit, the
    command and the time, from which ``update_results`` builds the summary tables of RESULTS.md and
    the README."""
    import json

    from bench.update_results import run_facts

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    facts = run_facts() | {"figures": [list(row) for row in figures]}
    out.with_suffix(".json").write_text(json.dumps(facts, indent=1) + "\n")
    print("\n".join(lines))


def speed_probe(queries: int = 100) -> float:
    """CPU milliseconds this process takes to embed one short query with the active model, averaged
    over ``queries`` fixed ones: the machine's speed at the time of a run. The machines are shared
    and drift (the same code embedded a query in 2.9 ms one morning and 5–7 ms that afternoon), so
    a run's absolute figures compare with another run's only next to this."""
    from memory_service.embeddings.backends import get_backend

    backend = get_backend()
    texts = [f"what did we decide about the cache timeout of service {n}" for n in range(queries)]
    backend.embed_query(texts[0])
    started = time.process_time()
    for text in texts:
        backend.embed_query(text)
    return (time.process_time() - started) * 1000 / queries


def process_tree_cpu(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user and system) used so far by each named process and its live descendants,
    from /proc (Linux): ``roots`` name → pid. A descendant counts for the nearest root above it; one
    that has exited counts only once its parent has waited for it."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent, used = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # it exited meanwhile
                continue
            parent[int(entry)], used[int(entry)] = int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks
    names = {pid: name for name, pid in roots.items()}
    totals = dict.fromkeys(roots, 0.0)
    for pid, seconds in used.items():
        while pid > 1 and pid not in names:
            pid = parent.get(pid, 0)
        if pid in names:
            totals[names[pid]] += seconds
    return totals


def start_uvicorn(port: int, *, env: dict, workers: int | None = None, attempts: int = 300, probe_timeout: float = 1):
    """uvicorn serving the whole application on loopback ``port`` with the environment plus ``env``
    (``--workers`` when given; its output discarded), returned once ``/healthz`` answers 200.
    Raises RuntimeError when it has not after ``attempts`` probes."""
    import httpx

    command = [
        sys.executable, "-m", "uvicorn", "memory_service.asgi:application", "--host", "127.0.0.1", "--port", str(port),
        "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    if workers is not None:
        command += ["--workers", str(workers)]
    process = subprocess.Popen(command, env=os.environ | env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(attempts):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=probe_timeout).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError("the web server did not start")


def start_celery_worker(options: list[str], *, env: dict | None = None, log_path: Path | None = None):
    """``celery -A memory_service worker <options>`` with the environment plus ``env``, its output
    appended to ``log_path`` (discarded without one), returned once a worker answers a ping.
    Raises RuntimeError (the process killed) when it exits or has not answered within 60 s."""
    from memory_service.celery import app

    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memory_service", "worker", *options],
        env=os.environ | (env or {}),
        stdout=log,
        stderr=subprocess.STDOUT if log_path else subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the worker did not start" + (f"; see {log_path}" if log_path else ""))
    return process


__all__ = ["bench_stack", "start_celery_worker", "start_uvicorn", "write_section"]
