"""Rebuild ``memory_service/pii/data/name_lexicon.txt.gz`` from the installed Faker.

Usage (from the repository root): ``.venv/bin/python bench/pii/build_name_lexicon.py``
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_service.pii.names import LEXICON_FILE, build_lexicon  # noqa: E402

if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    target = ROOT / "memory_service" / "pii" / LEXICON_FILE
    target.write_bytes(build_lexicon())
    print(f"wrote {target.relative_to(ROOT)}")
