"""Structural rules that keep tenancy in one place (STYLE.md)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTERFACE_GLOBS = ["*/api/*.py", "*/*/api/*.py", "*/tasks.py", "*/*/tasks.py", "*/mcp*/*.py", "*/*/mcp*/*.py"]


def test_it_keeps_orm_queries_out_of_views_tools_and_tasks():
    offenders = []
    for pattern in INTERFACE_GLOBS:
        for path in ROOT.glob(pattern):
            if ".venv" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\.objects\.", line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert offenders == [], "use a selector or service instead of .objects. in: " + ", ".join(offenders)


def test_it_checks_some_interface_modules():
    assert any(ROOT.glob("*/api/views.py")) and any(ROOT.glob("*/*/api/views.py"))
