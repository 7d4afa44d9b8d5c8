#!/usr/bin/env python3
"""Check the long-conversation retrieval set in ``life_chats/`` (standard library only).

Each ``life_chats/cNN.json`` is one conversation between two people over many sessions, with
questions whose evidence is one or more turns (format in README.md, "life_chats"). The checker
enforces the format, the counts, the fixed split and the word-overlap limits, and prints per
conversation and in total: turns, sessions, questions per kind, and the mean share of a
question's content words found in its evidence turns.

Usage (from the repository root):
    python3 bench/datasets/life_chats_check.py            # every conversation
    python3 bench/datasets/life_chats_check.py c03        # one conversation
Exit status 0 when every file checked passes, 1 otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # run as a script: the repository root, for bench.datasets

# The bilingual set's checker: the same timestamp and personal-data rules.
from bench.datasets.validate import EMAIL, PHONE, parse_ts  # noqa: E402

FOLDER = HERE / "life_chats"

KINDS = ("single_hop", "multi_hop", "temporal", "open_domain")
MIN_PER_CONVERSATION = {"single_hop": 18, "multi_hop": 10, "temporal": 10, "open_domain": 8}
MIN_TURNS, MIN_SESSIONS, MIN_QUESTIONS = 380, 16, 52
MIN_TOTAL_TURNS, MIN_TOTAL_QUESTIONS = 3000, 400
# Content-word overlap: the share of a question's content words that occur in its evidence turns.
MAX_MEAN_OVERLAP = 0.30
MAX_QUESTION_OVERLAP = 0.60

# PostgreSQL's English stop words (the service's lexical stop list), plus question words.
_STOP_WORDS_TEXT = """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this that these those
    am is are was were be been being have has had having do does did doing a an the and but if or because
    as until while of at by for with about against between into through during before after above below to
    from up down in out on off over under again further then once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will just
    don should now would could might may also ever"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())
WORD = re.compile(r"[a-z0-9]+")
URL = re.compile(r"https?://|www\.", re.I)
ID_CONVERSATION = re.compile(r"c\d\d")


def content_words(text: str, names: set[str]) -> set[str]:
    """Lower-cased words of ``text`` without stop words and the speakers' names."""
    return {w for w in WORD.findall(text.lower()) if w not in STOP_WORDS and w not in names}


def overlap(question: str, evidence_texts: list[str], names: set[str]) -> float:
    """The share of the question's content words that occur in the evidence turns (0 when none)."""
    asked = content_words(question, names)
    if not asked:
        return 0.0
    seen: set[str] = set()
    for text in evidence_texts:
        seen |= content_words(text, names)
    return len(asked & seen) / len(asked)


def check_conversation(path: Path) -> tuple[list[str], dict]:
    """Errors in one conversation file, and its counts."""
    errors: list[str] = []
    data = json.loads(path.read_text(encoding="utf-8"))
    cid = data.get("conversation")
    if cid != path.stem or not ID_CONVERSATION.fullmatch(str(cid)):
        errors.append(f"'conversation' must be the file's name ({path.stem})")
    expected_split = "heldout" if int(path.stem[1:]) % 2 == 0 else "train"
    if data.get("split") != expected_split:
        errors.append(f"'split' must be {expected_split!r} (odd conversations train, even held-out)")
    speakers = data.get("speakers")
    if not (isinstance(speakers, list) and len(speakers) == 2 and all(isinstance(s, str) for s in speakers)):
        errors.append("'speakers' must be two first names")
        speakers = ["", ""]
    names = {s.lower() for s in speakers}

    sessions = data.get("sessions") or []
    turns = check_sessions(cid, sessions, speakers, errors)
    questions = data.get("questions") or []
    kinds, overlaps = check_questions(cid, questions, turns, names, errors)
    if len(turns) < MIN_TURNS:
        errors.append(f"{len(turns)} turns, at least {MIN_TURNS}")
    if len(sessions) < MIN_SESSIONS:
        errors.append(f"{len(sessions)} sessions, at least {MIN_SESSIONS}")
    if len(questions) < MIN_QUESTIONS:
        errors.append(f"{len(questions)} questions, at least {MIN_QUESTIONS}")
    for kind, minimum in MIN_PER_CONVERSATION.items():
        if kinds[kind] < minimum:
            errors.append(f"{kinds[kind]} {kind} questions, at least {minimum}")
    mean_overlap = sum(overlaps) / len(overlaps) if overlaps else 0.0
    if mean_overlap > MAX_MEAN_OVERLAP:
        errors.append(f"mean overlap {mean_overlap:.3f}, at most {MAX_MEAN_OVERLAP}")
    counts = {
        "turns": len(turns),
        "sessions": len(sessions),
        "questions": len(questions),
        "kinds": dict(kinds),
        "overlaps": overlaps,
        "split": data.get("split"),
    }
    return errors, counts


def check_sessions(cid, sessions: list, speakers: list, errors: list[str]) -> dict[str, dict]:
    """Each session's id and date and each turn's id, speaker and text; the turns by id."""
    turns: dict[str, dict] = {}
    previous_time = None
    for s_index, session in enumerate(sessions, 1):
        sid = f"{cid}-s{s_index:02d}"
        if session.get("id") != sid:
            errors.append(f"session {s_index}: id must be {sid}")
        when = parse_ts(session.get("date"))
        if when is None:
            errors.append(f"{sid}: 'date' must be YYYY-MM-DDTHH:MM:SSZ")
        elif previous_time is not None and when.date() <= previous_time.date():
            errors.append(f"{sid}: sessions must fall on later days than the one before")
        previous_time = when or previous_time
        for t_index, turn in enumerate(session.get("turns") or [], 1):
            tid = f"{sid}-t{t_index:03d}"
            if turn.get("id") != tid:
                errors.append(f"{sid} turn {t_index}: id must be {tid}")
            if turn.get("speaker") not in speakers:
                errors.append(f"{tid}: 'speaker' must be one of {speakers}")
            text = turn.get("text")
            if not isinstance(text, str) or not text.strip():
                errors.append(f"{tid}: empty text")
                continue
            if EMAIL.search(text) or PHONE.search(text) or URL.search(text):
                errors.append(f"{tid}: no e-mail addresses, phone numbers or URLs")
            turns[tid] = {**turn, "session": sid}
    return turns


def check_questions(cid, questions: list, turns: dict, names: set[str], errors: list[str]) -> tuple[Counter, list]:
    """Each question's id, kind, answer, evidence and overlap; the kinds counted and the overlaps."""
    kinds: Counter = Counter()
    overlaps: list[float] = []
    seen_questions: set[str] = set()
    for q_index, question in enumerate(questions, 1):
        qid = f"{cid}-q{q_index:03d}"
        if question.get("id") != qid:
            errors.append(f"question {q_index}: id must be {qid}")
        kind = question.get("kind")
        if kind not in KINDS:
            errors.append(f"{qid}: 'kind' must be one of {KINDS}")
        kinds[kind] += 1
        text = question.get("question")
        if not isinstance(text, str) or not text.strip():
            errors.append(f"{qid}: empty question")
            continue
        if text.strip().lower() in seen_questions:
            errors.append(f"{qid}: the same question twice")
        seen_questions.add(text.strip().lower())
        if not isinstance(question.get("answer"), str) or not question["answer"].strip():
            errors.append(f"{qid}: 'answer' is required")
        evidence = question.get("evidence")
        if not isinstance(evidence, list) or not evidence or any(e not in turns for e in evidence):
            errors.append(f"{qid}: 'evidence' must name turns of this conversation")
            continue
        if len(set(evidence)) != len(evidence):
            errors.append(f"{qid}: evidence listed twice")
        if kind == "multi_hop" and len({turns[e]["session"] for e in evidence}) < 2:
            errors.append(f"{qid}: multi_hop evidence must span at least two sessions")
        if kind == "temporal" and not re.search(r"\b(when|how long|what (day|month|year|week))\b", text, re.I):
            errors.append(f"{qid}: a temporal question asks when or how long")
        share = overlap(text, [turns[e]["text"] for e in evidence], names)
        if share > MAX_QUESTION_OVERLAP:
            errors.append(f"{qid}: {share:.2f} of its content words in its evidence, at most {MAX_QUESTION_OVERLAP}")
        overlaps.append(share)
    return kinds, overlaps


def main(argv: list[str]) -> int:
    paths = [FOLDER / f"{name}.json" for name in argv] if argv else sorted(FOLDER.glob("c*.json"))
    failed = False
    totals: Counter = Counter()
    all_overlaps: list[float] = []
    for path in paths:
        errors, counts = check_conversation(path)
        mean = sum(counts["overlaps"]) / len(counts["overlaps"]) if counts["overlaps"] else 0.0
        kinds = ", ".join(f"{k}={counts['kinds'].get(k, 0)}" for k in KINDS)
        print(
            f"{path.stem} ({counts['split']}): {counts['turns']} turns in {counts['sessions']} sessions, "
            f"{counts['questions']} questions ({kinds}); mean overlap {mean:.3f}"
        )
        for error in errors[:40]:
            print(f"  ERROR {error}")
        if len(errors) > 40:
            print(f"  ... and {len(errors) - 40} more errors")
        failed = failed or bool(errors)
        totals["turns"] += counts["turns"]
        totals["questions"] += counts["questions"]
        for kind, n in counts["kinds"].items():
            totals[kind] += n
        all_overlaps += counts["overlaps"]
    if not argv:
        mean = sum(all_overlaps) / len(all_overlaps) if all_overlaps else 0.0
        zero = sum(1 for share in all_overlaps if share == 0.0)
        print(
            f"total: {totals['turns']} turns, {totals['questions']} questions "
            f"({', '.join(f'{k}={totals[k]}' for k in KINDS)}); mean overlap {mean:.3f}, "
            f"{zero} questions share no content word with their evidence"
        )
        if totals["turns"] < MIN_TOTAL_TURNS or totals["questions"] < MIN_TOTAL_QUESTIONS:
            print(f"  ERROR at least {MIN_TOTAL_TURNS} turns and {MIN_TOTAL_QUESTIONS} questions in all")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
