"""Structural rules that keep tenancy and access in one place (README, "How tenancy is enforced").

Interfaces — REST views, MCP tools, admin classes, management commands and Celery tasks — only
build a principal and call services and selectors: no ORM query and no access rule of their own.
The packages everyone builds on import nothing from the memories app.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTERFACE_GLOBS = [
    "*/api/*.py", "*/*/api/*.py",  # REST views
    "*/tasks.py", "*/*/tasks.py",  # Celery tasks
    "*/mcp*/*.py", "*/*/mcp*/*.py",  # MCP tools and their bridge
    "*/admin.py", "*/*/admin.py", "tenants/admin_site.py",  # admin classes
    "*/management/commands/*.py", "*/*/management/commands/*.py",  # commands
]  # fmt: skip
# Access rules on a token or principal: permissions, bindings. (The admin site's own
# ``has_permission(request)`` is Django's staff check, not ours.)
ACCESS_LOGIC = re.compile(
    r"\.has_permission\((?!request\))|\.repositories\b|\b(token|auth|principal)\.user\b|\bis_bound\b"
)
# Where the MCP SDK is told a token's scopes: a report, not a rule.
ACCESS_LOGIC_ALLOWED = {("memory_service/mcp_server/auth.py", "list(token.permissions)")}
FOUNDATIONS = ["memory_service/embeddings", "memory_service/pii", "audit", "tenants"]


def _interface_files() -> list[Path]:
    files = {path for pattern in INTERFACE_GLOBS for path in ROOT.glob(pattern)}
    return sorted(path for path in files if ".venv" not in path.parts and path.name != "__init__.py")


def _offending_lines(pattern: re.Pattern) -> list[str]:
    offenders = []
    for path in _interface_files():
        relative = str(path.relative_to(ROOT))
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{relative}:{number}")
    return offenders


def test_it_keeps_orm_queries_out_of_interfaces():
    offenders = _offending_lines(re.compile(r"\.objects\."))
    assert offenders == [], "use a selector or service instead of .objects. in: " + ", ".join(offenders)


def test_it_keeps_access_rules_out_of_interfaces():
    offenders = _offending_lines(ACCESS_LOGIC)
    assert offenders == [], "ask tenants.access (through a service or selector) instead, in: " + ", ".join(offenders)


def test_it_keeps_the_foundations_free_of_the_memories_app():
    offenders = []
    for package in FOUNDATIONS:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                if any(name.startswith("memory_service.memories") for name in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "foundations must not import the memories app: " + ", ".join(offenders)


def test_it_checks_every_kind_of_interface():
    files = [str(path.relative_to(ROOT)) for path in _interface_files()]
    for expected in ("memory_service/memories/api/views.py", "memory_service/memories/tasks.py",
                     "memory_service/mcp_server/server.py", "audit/admin.py",
                     "tenants/management/commands/create_token.py"):  # fmt: skip
        assert expected in files
    assert all((ROOT / package).is_dir() for package in FOUNDATIONS)
