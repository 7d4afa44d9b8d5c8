"""What the built distribution holds: the application, and the command-line client as a package of
its own; development tooling stays in the checkout."""

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent
SERVER_PACKAGES = ("django", "rest_framework", "memory_service", "tenants", "audit", "proposals", "dev")


def _shipped_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return find_packages(where=ROOT, **config["tool"]["setuptools"]["packages"]["find"])


def _is_server_module(name: str) -> bool:
    return any(name == package or name.startswith(package + ".") for package in SERVER_PACKAGES)


def test_it_ships_the_application_and_the_client_but_not_the_development_stack():
    shipped = _shipped_packages()
    assert {"memory_service", "memory_client", "tenants", "audit", "proposals"} <= set(shipped)
    assert [name for name in shipped if name == "dev" or name.startswith("dev.")] == []
    assert not (ROOT / "memory_service" / "devstack.py").exists()
    assert (ROOT / "dev" / "stack.py").is_file()


def test_it_points_the_console_scripts_at_the_client_package():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"memory-service": "memory_client.cli:main", "memory-service-mcp": "memory_client.cli:mcp_main"}


def test_it_keeps_the_client_free_of_server_imports():
    offenders = []
    for path in sorted((ROOT / "memory_client").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names if _is_server_module(name)]
    assert offenders == []


def test_it_imports_and_runs_the_client_without_django():
    # A fresh interpreter without Django settings: importing the client loads no server module.
    program = (
        "import json, sys; import memory_client.cli; print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    )
    environment = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    loaded = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, env=environment, check=True
    )
    modules = set(json.loads(loaded.stdout))
    assert "memory_client" in modules
    assert sorted(name for name in modules if _is_server_module(name)) == []

    helped = subprocess.run(
        [sys.executable, "-m", "memory_client", "--help"], capture_output=True, text=True, cwd=ROOT, env=environment
    )
    assert helped.returncode == 0
    assert "save-transcript" in helped.stdout and "context" in helped.stdout
