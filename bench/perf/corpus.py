"""Synthetic corpus for the search performance benchmark: tenants, owners and EN/JA engineering notes.

Deterministic for a given seed. Tenant sizes are skewed (tenant 0 holds 10 % of the rows, the
rest follow a shifted power law down to a long tail of small tenants); users and repositories
per tenant are fixed (a team does not grow with its memory) and chosen by Zipf weights, so each
tenant has a hot repository and a few heavy users.

From ``MONO_FROM`` rows on, one more tenant ("bench-mono") keeps ``MONO_SHARE`` of the corpus,
most of it in one repository: every search of it spans more than 100,000 vectors, past the
covering index's limit, so it takes the HNSW path that smaller corpora never reach. The other
tenants share the rest as before.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.perf.corpus_vocab import (
    EN,
    EN_QUERIES,
    EN_TEMPLATES,
    EN_TITLES,
    FIRST_NAMES,
    JA,
    JA_QUERIES,
    JA_TEMPLATES,
    JA_TITLES,
    PII_SNIPPETS,
    REPO_PREFIX,
    REPO_SUFFIX,
)

N_TENANTS = 100
BIG_SHARE = 0.10  # tenant 0
MONO_FROM = 1_000_000
MONO_SHARE = 0.15  # tenant N_TENANTS, from MONO_FROM rows on
MONO_CLASS = "monorepo (15%, HNSW)"
MONO_SCOPE_WEIGHTS = {"user": 0.17, "repository": 0.80, "session": 0.03}
TAIL_EXPONENT = 2.0
TAIL_SHIFT = 10.0
SCOPE_WEIGHTS = {"user": 0.40, "repository": 0.55, "session": 0.05}
KIND_WEIGHTS = {
    "note": 0.30,
    "lesson": 0.15,
    "conclusion": 0.10,
    "knowledge": 0.15,
    "decision": 0.12,
    "preference": 0.10,
    "idea": 0.06,
    "profile": 0.02,
}
JA_SHARE = 0.30
NOW = datetime(2026, 11, 29, tzinfo=UTC)


def tenant_shares() -> np.ndarray:
    """Share of the corpus per tenant; tenant 0 = 10 %, then a power-law tail (sum 1)."""
    ranks = np.arange(1, N_TENANTS, dtype=float)
    tail = (ranks + TAIL_SHIFT) ** -TAIL_EXPONENT
    tail = tail / tail.sum() * (1 - BIG_SHARE)
    return np.concatenate([[BIG_SHARE], tail])


def mono_rows(total: int) -> int:
    """The monorepo tenant's rows in a corpus of ``total`` rows."""
    return int(total * MONO_SHARE) if total >= MONO_FROM else 0


def tenant_sizes(total: int) -> list[int]:
    """Rows per tenant for a corpus of ``total`` rows, summing to ``total``: each of the
    ``N_TENANTS`` ≥ 1, then the monorepo tenant's (0 below ``MONO_FROM``)."""
    mono = mono_rows(total)
    rest = total - mono
    sizes = np.maximum(1, np.floor(tenant_shares() * rest)).astype(int)
    sizes[0] += rest - sizes.sum()  # rounding goes to the big tenant
    return [*sizes.tolist(), mono]


def zipf_weights(n: int, s: float = 1.0) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


@dataclass
class TenantSpec:
    index: int
    slug: str
    users: list[str]
    repositories: list[str]
    user_weights: np.ndarray = field(repr=False)
    repo_weights: np.ndarray = field(repr=False)
    scope_weights: dict[str, float] = field(default_factory=lambda: SCOPE_WEIGHTS)


def tenant_specs(reference_total: int = 1_000_000) -> list[TenantSpec]:
    """Users and repositories per tenant, sized by the tenant's share of a 1M corpus; the last
    spec is the monorepo tenant (six users, one repository)."""
    specs = []
    for i, share in enumerate(tenant_shares()):
        rows = share * reference_total
        n_users = int(max(1, min(40, round(rows**0.5 / 8))))
        n_repos = int(max(1, min(15, round(rows**0.5 / 20))))
        rng = random.Random(1000 + i)
        repos = []
        while len(repos) < n_repos:
            name = f"{rng.choice(REPO_PREFIX)}-{rng.choice(REPO_SUFFIX)}"
            if name not in repos:
                repos.append(name)
        users = [f"u{i:03d}-{rng.choice(FIRST_NAMES)}{k}" for k in range(n_users)]
        specs.append(
            TenantSpec(
                index=i,
                slug=f"bench-t{i:03d}",
                users=users,
                repositories=repos,
                user_weights=zipf_weights(n_users),
                repo_weights=zipf_weights(n_repos),
            )
        )
    rng = random.Random(1000 + N_TENANTS)
    users = [f"mono-{rng.choice(FIRST_NAMES)}{k}" for k in range(6)]
    specs.append(
        TenantSpec(
            index=N_TENANTS,
            slug="bench-mono",
            users=users,
            repositories=["platform-monorepo"],
            user_weights=zipf_weights(len(users)),
            repo_weights=zipf_weights(1),
            scope_weights=MONO_SCOPE_WEIGHTS,
        )
    )
    return specs


def tenant_class(index: int, rows: int, total: int) -> str:
    """The class a tenant's searches are reported under: the monorepo's own, else by its share of
    the other tenants' rows."""
    return MONO_CLASS if index == N_TENANTS else size_class(rows, total - mono_rows(total))


def size_class(rows: int, total: int) -> str:
    share = rows / total
    if share >= 0.09:
        return "big (10%)"
    if share >= 0.02:
        return "large (2-9%)"
    if share >= 0.005:
        return "medium (0.5-2%)"
    return "small (<0.5%)"


def _fill(rng: random.Random, template: str, vocab: dict, date: datetime) -> str:
    values = {key: rng.choice(vocab[key]) for key in ("component", "problem", "tech", "person", "reason")}
    values["action"] = rng.choice(vocab["action"])
    values["reason"] = values["reason"]
    values["a"], values["b"] = rng.sample(vocab["field"], 2)
    values["field"] = rng.choice(vocab["field"])
    values["n"] = rng.choice([2, 3, 5, 8, 10, 15, 20, 30, 50, 60, 100, 200, 500])
    values["v"] = f"{rng.randint(1, 19)}.{rng.randint(0, 12)}"
    values["date"] = f"{date:%Y-%m-%d}"
    # two passes: action/reason contain placeholders themselves
    text = template.format(**values)
    return text.format(**values) if "{" in text else text


def make_note(rng: random.Random, kind: str, *, ja: bool, date: datetime) -> tuple[str, str, list[str]]:
    """(title, text, tags) of one synthetic note; 1–3 sentences."""
    vocab, templates, titles = (JA, JA_TEMPLATES, JA_TITLES) if ja else (EN, EN_TEMPLATES, EN_TITLES)
    sentences = [_fill(rng, rng.choice(templates[kind]), vocab, date)]
    for _ in range(rng.choice([0, 1, 1, 2])):
        sentences.append(_fill(rng, rng.choice(templates[rng.choice(list(templates))]), vocab, date))
    title = _fill(rng, rng.choice(titles), vocab, date)
    tags = rng.sample(["incident", "perf", "db", "ci", "security", "frontend", "infra", "oncall", "cost", "api"], 2)
    return title, " ".join(sentences), tags


def make_query(rng: random.Random, *, ja: bool) -> str:
    vocab, templates = (JA, JA_QUERIES) if ja else (EN, EN_QUERIES)
    return _fill(rng, rng.choice(templates), vocab, NOW)


def make_pii_note(rng: random.Random, i: int) -> tuple[str, str]:
    """(title, text) of a write-benchmark note with 1–2 PII/secret values in it; unique by ``i``."""
    ja = rng.random() < JA_SHARE
    kind = rng.choice(list(KIND_WEIGHTS))
    title, text, _tags = make_note(rng, kind, ja=ja, date=NOW)
    snippets = []
    for _ in range(rng.choice([1, 1, 2])):
        snippets.append(
            rng.choice(PII_SNIPPETS).format(
                name=rng.choice(FIRST_NAMES),
                last=rng.choice(["smith", "tanaka", "garcia", "mueller", "kim"]),
                n2=f"{rng.randint(0, 99):02d}",
                hex24="".join(rng.choices("0123456789abcdef", k=24)),
                hex36="".join(rng.choices("0123456789abcdefABCDEF", k=36)),
            )
        )
    return title, f"{text} {' '.join(snippets)} (write #{i})"


@dataclass
class Row:
    tenant: int
    scope: str
    user: str
    repository: str
    session: str
    kind: str
    priority: str
    title: str
    text: str
    tags: list[str]
    occurred_at: datetime
    ja: bool


def make_rows(spec: TenantSpec, count: int, seed: int) -> list[Row]:
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    scopes = rng.choices(list(spec.scope_weights), weights=list(spec.scope_weights.values()), k=count)
    kinds = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()), k=count)
    user_idx = nprng.choice(len(spec.users), size=count, p=spec.user_weights)
    repo_idx = nprng.choice(len(spec.repositories), size=count, p=spec.repo_weights)
    rows = []
    for k in range(count):
        ja = rng.random() < JA_SHARE
        date = NOW - timedelta(days=rng.random() * 730)
        title, text, tags = make_note(rng, kinds[k], ja=ja, date=date)
        scope = scopes[k]
        user, repo = spec.users[user_idx[k]], spec.repositories[repo_idx[k]]
        if scope == "user":
            owner = (user, "", "")
        elif scope == "repository":
            owner = ("", repo, "")
        else:
            owner = (user, repo, f"s-{seed % 100000}-{k // 20}")
        rows.append(
            Row(
                tenant=spec.index,
                scope=scope,
                user=owner[0],
                repository=owner[1],
                session=owner[2],
                kind=kinds[k],
                priority="high" if rng.random() < 0.03 else "normal",
                title=title,
                text=text,
                tags=tags,
                occurred_at=date,
                ja=ja,
            )
        )
    return rows
