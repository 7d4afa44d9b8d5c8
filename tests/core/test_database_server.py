"""The embedded PostgreSQL that ``make run`` and ``make test`` start is tuned as dev/stack.py says."""

from pathlib import Path

from django.db import connection

from dev import stack as devstack


def _environment(pid: str) -> dict[str, str]:
    items = Path(f"/proc/{pid}/environ").read_text().split("\0")
    return dict(item.split("=", 1) for item in items if "=" in item)


def test_the_database_processes_keep_freed_memory_between_queries(db):
    # Backends inherit the postmaster's environment, where glibc reads these settings (a backend's
    # own /proc environ holds its process title instead).
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    status = Path(f"/proc/{backend}/status").read_text()
    postmaster = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
    environment = _environment(postmaster)
    assert {name: environment.get(name) for name in devstack.PG_MALLOC_ENV} == devstack.PG_MALLOC_ENV
