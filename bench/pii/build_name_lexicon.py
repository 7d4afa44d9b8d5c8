"""Rebuild ``memory_service/pii/data/name_lexicon.txt.gz`` from the installed Faker, and
``memory_service/pii/data/english_words.txt.gz`` from Debian's American and British English word lists.

Usage (from the repository root): ``.venv/bin/python bench/pii/build_name_lexicon.py``
(the word lists need ``apt-get install wamerican wbritish``; ``--names-only`` leaves them as they are).
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory_service.pii.names import (  # noqa: E402
    ENGLISH_WORDS_FILE,
    LEXICON_FILE,
    build_english_words,
    build_lexicon,
)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names-only", action="store_true", help="rebuild the name lexicon alone")
    args = parser.parse_args()
    built = {LEXICON_FILE: build_lexicon}
    if not args.names_only:
        built[ENGLISH_WORDS_FILE] = build_english_words
    for name, build in built.items():
        target = ROOT / "memory_service" / "pii" / name
        target.write_bytes(build())
        print(f"wrote {target.relative_to(ROOT)}")
