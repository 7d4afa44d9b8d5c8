"""Code, docs and comments point only at what the repository holds."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Documents that are not in the repository, however a comment might name them.
OUTSIDE_DOCUMENTS = re.compile(r"\b(?:DESIGN|STYLE|FACTS)\.md\b|\bseeds?\s+0\d\d\b|\bseeds/", re.IGNORECASE)
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".html", ".json", ""}


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / name for name in listed.decode().split("\0") if name]
    return [p for p in paths if p.suffix in TEXT_SUFFIXES and p.is_file() and p != Path(__file__).resolve()]


def test_it_names_no_document_outside_the_repository():
    offenders = []
    for path in _tracked_text_files():
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_DOCUMENTS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert offenders == []


def test_it_would_notice_such_a_reference():
    assert OUTSIDE_DOCUMENTS.search("see DESIGN.md, section 4")
    assert OUTSIDE_DOCUMENTS.search("as seed 003 asks")
    assert not OUTSIDE_DOCUMENTS.search("see README.md and bench/RESULTS.md")
