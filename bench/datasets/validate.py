#!/usr/bin/env python3
"""Validate the retrieval-benchmark datasets in this folder (standard library only).

Checks bilingual_notes.json against the formats described in
README.md: required fields and enums, id formats and uniqueness, that every referenced id
exists, supersession links, per-category rules and minimum counts, and a few heuristics
against personal data (e-mail addresses, phone numbers, URLs). Prints counts per category.

Usage (from the repository root):  python3 bench/datasets/validate.py
Exit status 0 when the file passes, 1 otherwise.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent

MEMORY_KINDS = {"lesson", "decision", "conclusion", "knowledge", "preference", "note"}
LANGS = {"en", "ja"}
QUERY_CATEGORIES = ("paraphrase", "cross_lingual", "keyword", "superseded", "temporal")
QUERY_MINIMUMS = {"paraphrase": 30, "cross_lingual": 30, "keyword": 25, "superseded": 20, "temporal": 15}

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
KANA = re.compile(r"[\u3040-\u30ff]")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
PHONE = re.compile(r"(?<![\w.-])(?:\+\d{1,3}[ -]?)?\(?\d{2,4}\)?[ -]\d{3,4}[ -]\d{3,4}(?![\w-])")
URL = re.compile(r"https?://", re.I)
TEMPORAL_HINT = re.compile(
    r"\b(20\d\d|when|January|February|March|April|May|June|July|August|September|October|"
    r"November|December)\b|いつ|20\d\d年|時点",
    re.I,
)
EN_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(¥$0-9])")


class Report:
    def __init__(self, name: str) -> None:
        self.name = name
        self.errors: list[str] = []

    def err(self, msg: str) -> None:
        self.errors.append(msg)


def parse_ts(value: object) -> datetime | None:
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", value):
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def check_text_privacy(rep: Report, where: str, text: str) -> None:
    if EMAIL.search(text):
        rep.err(f"{where}: looks like it contains an e-mail address")
    if PHONE.search(text):
        rep.err(f"{where}: looks like it contains a phone number: {PHONE.search(text).group(0)!r}")
    if URL.search(text):
        rep.err(f"{where}: contains a URL")


def sentence_count(text: str, lang: str) -> int:
    if lang == "ja":
        return max(1, len([s for s in re.split(r"[。!?]", text) if s.strip()]))
    return len([s for s in EN_SENTENCE_SPLIT.split(text.strip()) if s.strip()])


def load(rep: Report, path: Path) -> dict | None:
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        rep.err(f"cannot read {path.name}: {exc}")
        return None
    if not isinstance(data, dict):
        rep.err(f"{path.name}: top level must be an object")
        return None
    return data


# --------------------------------------------------------------------------- bilingual
def validate_bilingual(path: Path) -> tuple[Report, dict]:
    rep = Report(path.name)
    stats: dict = {}
    data = load(rep, path)
    if data is None:
        return rep, stats
    memories, queries = data.get("memories"), data.get("queries")
    if not isinstance(memories, list) or not isinstance(queries, list):
        rep.err("'memories' and 'queries' must both be lists")
        return rep, stats
    extra = set(data) - {"memories", "queries"}
    if extra:
        rep.err(f"unexpected top-level keys: {sorted(extra)}")
    mem = check_memories(rep, memories)
    superseded_by, links = check_links(rep, mem)
    chains = count_chains(mem, superseded_by)
    repos = sorted({m.get("repository") for m in mem.values() if isinstance(m.get("repository"), str)})
    if len(repos) != 8:
        rep.err(f"expected 8 repositories, found {len(repos)}: {repos}")

    seen_q: set[str] = set()
    for i, q in enumerate(queries):
        check_query(rep, i, q, mem=mem, repos=repos, seen_q=seen_q, superseded_by=superseded_by)
    cats, langs, cross = check_minimums(rep, mem, queries, chains)
    years = Counter(m["occurred_at"][:4] for m in mem.values() if parse_ts(m.get("occurred_at")))
    stats.update(
        memories=len(mem),
        queries=len(queries),
        repos=Counter(m.get("repository") for m in mem.values()),
        langs=langs,
        kinds=Counter(m.get("kind") for m in mem.values()),
        years=years,
        links=links,
        chains=chains,
        partial=sum(1 for m in mem.values() if m.get("partial")),
        categories=cats,
        query_langs=Counter(q.get("lang") for q in queries if isinstance(q, dict)),
        cross=cross,
        scoped=sum(1 for q in queries if isinstance(q, dict) and q.get("repository") is not None),
    )
    return rep, stats


def check_memories(rep: Report, memories: list) -> dict[str, dict]:
    """Each memory's fields; the memories with a well-formed, unique id, by id."""
    mem: dict[str, dict] = {}
    allowed_m = {"id", "repository", "kind", "lang", "title", "text", "occurred_at", "supersedes", "partial"}
    for i, m in enumerate(memories):
        where = f"memories[{i}]"
        if not isinstance(m, dict):
            rep.err(f"{where}: not an object")
            continue
        mid = m.get("id")
        where = f"memory {mid!r}"
        if not isinstance(mid, str) or not re.fullmatch(r"m\d{3}", mid):
            rep.err(f"{where}: id must look like m001")
            continue
        if mid in mem:
            rep.err(f"{where}: duplicate id")
            continue
        mem[mid] = m
        if set(m) - allowed_m:
            rep.err(f"{where}: unexpected keys {sorted(set(m) - allowed_m)}")
        if not isinstance(m.get("repository"), str) or not re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", m["repository"]):
            rep.err(f"{where}: bad repository")
        if m.get("kind") not in MEMORY_KINDS:
            rep.err(f"{where}: kind must be one of {sorted(MEMORY_KINDS)}")
        if m.get("lang") not in LANGS:
            rep.err(f"{where}: lang must be en or ja")
        for field in ("title", "text"):
            if not isinstance(m.get(field), str) or not m[field].strip():
                rep.err(f"{where}: {field} must be a non-empty string")
        if parse_ts(m.get("occurred_at")) is None:
            rep.err(f"{where}: occurred_at must be UTC like 2025-03-14T10:00:00Z")
        if "partial" in m and not isinstance(m["partial"], bool):
            rep.err(f"{where}: partial must be a boolean")
        if "partial" in m and m["partial"] and not m.get("supersedes"):
            rep.err(f"{where}: partial is true but supersedes is empty")
        text = m.get("text") if isinstance(m.get("text"), str) else ""
        title = m.get("title") if isinstance(m.get("title"), str) else ""
        if m.get("lang") == "ja" and not CJK.search(text):
            rep.err(f"{where}: lang ja but the text has no Japanese characters")
        if m.get("lang") == "en" and CJK.search(text + title):
            rep.err(f"{where}: lang en but the text contains Japanese characters")
        if text and m.get("lang") in LANGS and not 1 <= sentence_count(text, m["lang"]) <= 4:
            rep.err(f"{where}: text should have 1-4 sentences (found {sentence_count(text, m['lang'])})")
        check_text_privacy(rep, where, title + "\n" + text)
    return mem


def check_links(rep: Report, mem: dict[str, dict]) -> tuple[dict[str, list[tuple[str, bool]]], int]:
    """The supersession links: what supersedes each memory (id, partial), and how many links there are."""
    superseded_by: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    links = 0
    for mid, m in mem.items():
        sup = m.get("supersedes")
        if sup is None:
            continue
        if not isinstance(sup, list) or not sup:
            rep.err(f"memory {mid}: supersedes must be a non-empty list of ids")
            continue
        if m.get("kind") != "decision":
            rep.err(f"memory {mid}: only decisions supersede others")
        for old in sup:
            if old not in mem:
                rep.err(f"memory {mid}: supersedes unknown id {old!r}")
                continue
            if old == mid:
                rep.err(f"memory {mid}: supersedes itself")
                continue
            links += 1
            superseded_by[old].append((mid, bool(m.get("partial", False))))
            if mem[old].get("repository") != m.get("repository"):
                rep.err(f"memory {mid}: supersedes {old} from another repository")
            t_new, t_old = parse_ts(m.get("occurred_at")), parse_ts(mem[old].get("occurred_at"))
            if t_new and t_old and not t_old < t_new:
                rep.err(f"memory {mid}: supersedes {old}, which is not older")
    return superseded_by, links


def ancestors(mem: dict, mid: str) -> set[str]:
    """The memories ``mid`` supersedes, directly or through others."""
    seen, stack = set(), [mid]
    while stack:
        cur = stack.pop()
        for old in mem.get(cur, {}).get("supersedes", []) or []:
            if old in mem and old not in seen:
                seen.add(old)
                stack.append(old)
    return seen


def count_chains(mem: dict[str, dict], superseded_by: dict) -> int:
    """The connected components of the supersession graph (chains)."""
    # chains = connected components of the supersession graph
    parent = {mid: mid for mid in mem}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for mid, m in mem.items():
        for old in m.get("supersedes", []) or []:
            if old in mem:
                parent[find(old)] = find(mid)
    comp = Counter(find(mid) for mid in mem if m_has_link(mid, mem, superseded_by))
    return len(comp)


def check_query(rep: Report, i: int, q, *, mem: dict, repos: list, seen_q: set[str], superseded_by: dict) -> None:
    """One query's fields, its relevant memories and its category's rules."""
    allowed_q = {"id", "lang", "query", "category", "repository", "relevant", "current"}
    if not isinstance(q, dict):
        rep.err(f"queries[{i}]: not an object")
        return
    qid = q.get("id")
    where = f"query {qid!r}"
    if not isinstance(qid, str) or not re.fullmatch(r"q\d{3}", qid):
        rep.err(f"{where}: id must look like q001")
        return
    if qid in seen_q:
        rep.err(f"{where}: duplicate id")
    seen_q.add(qid)
    if set(q) - allowed_q:
        rep.err(f"{where}: unexpected keys {sorted(set(q) - allowed_q)}")
    lang, cat, text = q.get("lang"), q.get("category"), q.get("query")
    if lang not in LANGS:
        rep.err(f"{where}: lang must be en or ja")
    if cat not in QUERY_CATEGORIES:
        rep.err(f"{where}: category must be one of {QUERY_CATEGORIES}")
    if not isinstance(text, str) or not text.strip():
        rep.err(f"{where}: query must be a non-empty string")
        text = ""
    if lang == "ja" and not CJK.search(text):
        rep.err(f"{where}: lang ja but the query has no Japanese characters")
    if lang == "en" and CJK.search(text):
        rep.err(f"{where}: lang en but the query contains Japanese characters")
    check_text_privacy(rep, where, text)
    if "repository" not in q:
        rep.err(f"{where}: repository is required (use null for all repositories)")
    repo = q.get("repository")
    if repo is not None and repo not in repos:
        rep.err(f"{where}: unknown repository {repo!r}")
    rel = q.get("relevant")
    if not isinstance(rel, list) or not 1 <= len(rel) <= 3 or len(set(rel)) != len(rel):
        rep.err(f"{where}: relevant must list 1-3 distinct memory ids")
        return
    missing = [r for r in rel if r not in mem]
    if missing:
        rep.err(f"{where}: relevant ids do not exist: {missing}")
        return
    if repo is not None:
        outside = [r for r in rel if mem[r].get("repository") != repo]
        if outside:
            rep.err(f"{where}: relevant {outside} are outside repository {repo}")
    rel_langs = {mem[r].get("lang") for r in rel}
    if cat == "paraphrase" and rel_langs != {lang}:
        rep.err(f"{where}: paraphrase query must be in the language of its notes")
    if cat == "cross_lingual" and lang in rel_langs:
        rep.err(f"{where}: cross_lingual query must be in the other language than its notes")
    if cat == "temporal" and not TEMPORAL_HINT.search(text):
        rep.err(f"{where}: temporal query should ask about a time (a year, a month, when/いつ)")
    cur = q.get("current")
    if cat == "superseded":
        if cur not in rel:
            rep.err(f"{where}: current must be one of the relevant ids")
        else:
            if len(rel) < 2:
                rep.err(f"{where}: superseded query needs the older decision(s) in relevant too")
            others = set(rel) - {cur}
            if not others <= ancestors(mem, cur):
                rep.err(
                    f"{where}: current {cur} does not (transitively) supersede {sorted(others - ancestors(mem, cur))}"
                )
            full = [n for n, partial in superseded_by.get(cur, []) if not partial]
            if full:
                rep.err(f"{where}: current {cur} is itself superseded by {full}")
    elif cur is not None:
        rep.err(f"{where}: current is only for the superseded category")


def check_minimums(rep: Report, mem: dict, queries: list, chains: int) -> tuple[Counter, Counter, Counter]:
    """The minimum counts of memories, queries per category and chains, and the language balance;
    the categories, languages and cross-lingual directions counted."""
    cats = Counter(q.get("category") for q in queries if isinstance(q, dict))
    langs = Counter(m.get("lang") for m in mem.values())
    if len(mem) < 180:
        rep.err(f"need at least 180 memories, have {len(mem)}")
    if mem and not 0.4 <= langs["en"] / len(mem) <= 0.6:
        rep.err(f"memories should be roughly half English, half Japanese: {dict(langs)}")
    if len(queries) < 120:
        rep.err(f"need at least 120 queries, have {len(queries)}")
    for c, n in QUERY_MINIMUMS.items():
        if cats[c] < n:
            rep.err(f"need at least {n} {c} queries, have {cats[c]}")
    if chains < 20:
        rep.err(f"need at least 20 supersession chains, have {chains}")
    cross = Counter(
        (q.get("lang"), mem[q["relevant"][0]].get("lang"))
        for q in queries
        if isinstance(q, dict)
        and q.get("category") == "cross_lingual"
        and q.get("relevant")
        and q["relevant"][0] in mem
    )
    if cross and (cross[("en", "ja")] == 0 or cross[("ja", "en")] == 0):
        rep.err("cross_lingual queries must go both ways (en->ja and ja->en)")
    return cats, langs, cross


def m_has_link(mid: str, mem: dict, superseded_by: dict) -> bool:
    return bool(mem[mid].get("supersedes")) or mid in superseded_by


def fmt(counter: Counter | dict, order: tuple | None = None) -> str:
    keys = list(order) if order else sorted(counter)
    return ", ".join(f"{k}={counter.get(k, 0)}" for k in keys)


def main() -> int:
    rep_b, sb = validate_bilingual(HERE / "bilingual_notes.json")
    if sb:
        print("bilingual_notes.json")
        print(f"  memories: {sb['memories']} ({fmt(sb['langs'])})")
        print(f"    repositories: {fmt(sb['repos'])}")
        print(f"    kinds: {fmt(sb['kinds'])}")
        print(f"    years: {fmt(sb['years'])}")
        print(f"    supersession: {sb['links']} links in {sb['chains']} chains ({sb['partial']} partial)")
        print(
            f"  queries: {sb['queries']} ({fmt(sb['query_langs'])}; "
            f"{sb['scoped']} scoped to one repository, {sb['queries'] - sb['scoped']} across all)"
        )
        print(f"    categories: {fmt(sb['categories'], QUERY_CATEGORIES)}")
        print(
            f"    cross_lingual directions: en->ja={sb['cross'].get(('en', 'ja'), 0)}, "
            f"ja->en={sb['cross'].get(('ja', 'en'), 0)}"
        )
    ok = True
    for rep in (rep_b,):
        if rep.errors:
            ok = False
            print(f"\n{rep.name}: {len(rep.errors)} error(s)")
            for e in rep.errors:
                print(f"  - {e}")
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
