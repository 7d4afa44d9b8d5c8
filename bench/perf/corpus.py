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


# --- vocabulary ------------------------------------------------------------------------------

REPO_PREFIX = [
    "payments",
    "web",
    "mobile",
    "search",
    "billing",
    "auth",
    "data",
    "infra",
    "ml",
    "docs",
    "api",
    "notify",
    "ledger",
    "catalog",
    "checkout",
    "identity",
    "analytics",
    "gateway",
]
REPO_SUFFIX = ["api", "frontend", "service", "worker", "platform", "pipeline", "sdk", "core", "jobs", "app"]
FIRST_NAMES = [
    "aiko",
    "ben",
    "chen",
    "dana",
    "emi",
    "farid",
    "gus",
    "hana",
    "ivan",
    "jun",
    "kate",
    "liam",
    "mei",
    "nils",
    "olga",
    "priya",
    "quinn",
    "ren",
    "sora",
    "tom",
    "uma",
    "vik",
    "wen",
    "yuki",
]

EN = {
    "component": [
        "database connection pool",
        "Redis cache",
        "Celery worker",
        "Kafka consumer",
        "CI pipeline",
        "Docker build",
        "Kubernetes deployment",
        "nginx ingress",
        "auth service",
        "payment webhook",
        "search index",
        "GraphQL gateway",
        "React frontend",
        "mobile release build",
        "Terraform state",
        "S3 upload",
        "cron scheduler",
        "gRPC client",
        "OpenTelemetry exporter",
        "feature flag service",
        "migration runner",
        "rate limiter",
        "session store",
        "email sender",
        "PDF renderer",
        "image resizer",
        "websocket server",
        "billing export",
        "audit log",
        "Elasticsearch cluster",
    ],
    "problem": [
        "timeout",
        "memory leak",
        "deadlock",
        "flaky test",
        "race condition",
        "N+1 query",
        "certificate expiry",
        "rate limit errors",
        "disk full",
        "slow cold start",
        "connection reset",
        "duplicate messages",
        "stale cache entries",
        "OOM kill",
        "clock skew",
        "schema drift",
        "high p99 latency",
        "lock contention",
        "retry storm",
        "unicode normalisation bug",
        "timezone off-by-one",
        "missing index",
        "dependency conflict",
        "broken source map",
    ],
    "action": [
        "raised the pool size to {n}",
        "added a composite index on ({a}, {b})",
        "pinned {tech} to {v}",
        "added retries with exponential backoff",
        "moved the job to a dedicated queue",
        "set the timeout to {n} seconds",
        "switched to streaming reads",
        "batched the writes by {n}",
        "enabled connection health checks",
        "split the migration into two steps",
        "replaced polling with a webhook",
        "cached the result for {n} minutes",
        "added a circuit breaker",
        "upgraded {tech} to {v}",
        "turned on idempotency keys",
        "rewrote the query without the subquery",
        "increased the worker concurrency to {n}",
        "added a canary stage before production",
        "made the test use a frozen clock",
    ],
    "tech": [
        "PostgreSQL",
        "Redis",
        "Kafka",
        "Celery",
        "Django",
        "React",
        "Terraform",
        "nginx",
        "gRPC",
        "Node",
        "Python",
        "Go",
        "Rust",
        "Kotlin",
        "Swift",
        "pgvector",
        "Elasticsearch",
        "RabbitMQ",
        "Sentry",
        "Prometheus",
        "Grafana",
        "Vite",
        "webpack",
        "pytest",
        "Playwright",
    ],
    "field": [
        "tenant_id",
        "created_at",
        "user_id",
        "status",
        "order_id",
        "amount",
        "currency",
        "email_hash",
        "external_ref",
        "updated_at",
        "region",
        "sku",
    ],
    "person": [
        "the on-call engineer",
        "the platform team",
        "the payments team",
        "our SRE",
        "the mobile team",
        "the data team",
        "the security reviewer",
        "the tech lead",
    ],
    "reason": [
        "it halves the p95 latency",
        "it keeps the API backwards compatible",
        "it removes a single point of failure",
        "the vendor SDK is unmaintained",
        "it is easier to test",
        "it saves about {n} dollars a month",
        "it avoids a full table scan",
        "auditors asked for it",
        "it matches what the other services do",
    ],
}
JA = {
    "component": [
        "データベース接続プール",
        "Redis キャッシュ",
        "Celery ワーカー",
        "Kafka コンシューマー",
        "CI パイプライン",
        "Docker ビルド",
        "Kubernetes デプロイ",
        "認証サービス",
        "決済 Webhook",
        "検索インデックス",
        "フロントエンドのビルド",
        "モバイルのリリースビルド",
        "Terraform の状態管理",
        "定期実行ジョブ",
        "メール送信",
        "画像リサイズ",
        "監査ログ",
        "レートリミッター",
        "セッションストア",
        "請求エクスポート",
    ],
    "problem": [
        "タイムアウト",
        "メモリリーク",
        "デッドロック",
        "不安定なテスト",
        "競合状態",
        "N+1 クエリ",
        "証明書の期限切れ",
        "レート制限エラー",
        "ディスク容量不足",
        "接続リセット",
        "メッセージの重複",
        "古いキャッシュ",
        "OOM による強制終了",
        "時刻のずれ",
        "スキーマの不一致",
        "ロック競合",
        "リトライの嵐",
        "タイムゾーンのずれ",
        "インデックス不足",
        "依存関係の衝突",
    ],
    "action": [
        "接続プールを {n} に増やした",
        "({a}, {b}) に複合インデックスを追加した",
        "{tech} を {v} に固定した",
        "指数バックオフ付きのリトライを入れた",
        "ジョブを専用キューに移した",
        "タイムアウトを {n} 秒にした",
        "書き込みを {n} 件ずつまとめた",
        "接続のヘルスチェックを有効にした",
        "マイグレーションを二段階に分けた",
        "ポーリングを Webhook に置き換えた",
        "結果を {n} 分キャッシュした",
        "サーキットブレーカーを入れた",
        "{tech} を {v} に上げた",
        "冪等キーを必須にした",
        "サブクエリを使わない形に書き直した",
        "本番の前にカナリア段階を追加した",
        "テストで固定時計を使うようにした",
    ],
    "tech": EN["tech"],
    "field": EN["field"],
    "person": ["当番のエンジニア", "基盤チーム", "決済チーム", "SRE", "モバイルチーム", "データチーム", "テックリード"],
    "reason": [
        "p95 レイテンシが半分になる",
        "API の後方互換性を保てる",
        "単一障害点がなくなる",
        "ベンダー SDK が保守されていない",
        "テストしやすい",
        "月に約 {n} ドル節約できる",
        "全件スキャンを避けられる",
        "監査で求められた",
    ],
}

EN_TEMPLATES = {
    "note": [
        "Saw {problem} in the {component} again on {date}; {action} as a stopgap.",
        "{component}: {problem} shows up under load. Checked the dashboards, {person} is looking into it.",
        "Quick note: the {component} logs {problem} when {tech} restarts. Workaround: {action}.",
    ],
    "lesson": [
        "Lesson learned: {problem} in the {component} came from a missing limit. "
        "We {action}; do this from the start next time.",
        "When the {component} hits {problem}, do not restart it blindly — {action} first, then check {field}.",
        "Never deploy the {component} without checking for {problem}; last time {person} had to roll back.",
    ],
    "conclusion": [
        "Conclusion after the incident review: {problem} in the {component} was caused by {tech}. We {action}.",
        "Root cause of the {problem}: the {component} read {field} without an index. Fixed: {action}.",
    ],
    "knowledge": [
        "The {component} uses {tech} {v}; {field} is the partition key and {problem} happens if it is missing.",
        "{tech} in the {component} retries {n} times by default, which explains the {problem} we saw.",
        "How the {component} works: requests are keyed by {field}, stored in {tech}, and expire after {n} minutes.",
    ],
    "decision": [
        "Decision: the {component} moves to {tech} {v} because {reason}.",
        "We decided to keep {field} in the {component} and {action}, because {reason}.",
        "ADR: use {tech} for the {component}; rejected alternatives were too slow. Rationale: {reason}.",
    ],
    "preference": [
        "Prefer {tech} over hand-written scripts for the {component}; {person} reviews changes.",
        "Code style: in the {component}, name columns like {field} and keep migrations reversible.",
        "I prefer small PRs for the {component}; always include a test for {problem}.",
    ],
    "idea": [
        "Idea: we could avoid {problem} in the {component} if we {action}.",
        "Maybe try {tech} {v} for the {component}; it might fix the {problem}.",
    ],
    "profile": [
        "Works mostly on the {component} and {tech}; on call for {problem} alerts.",
        "Owns the {component}; prefers {tech} and asks for benchmarks before merging.",
    ],
}
JA_TEMPLATES = {
    "note": [
        "{date} にも {component} で{problem}が発生。暫定対応として{action}。",
        "{component}: 負荷がかかると{problem}が出る。ダッシュボードを確認し、{person}が調査中。",
        "メモ: {tech} の再起動時に {component} が{problem}を出す。回避策: {action}。",
    ],
    "lesson": [
        "教訓: {component} の{problem}は上限設定の漏れが原因だった。{action}。次回は最初から入れること。",
        "{component} で{problem}が起きたら、むやみに再起動せず、まず{action}。その後 {field} を確認する。",
    ],
    "conclusion": [
        "障害振り返りの結論: {component} の{problem}は {tech} が原因。{action}。",
        "{problem}の根本原因: {component} がインデックスなしで {field} を読んでいた。対応: {action}。",
    ],
    "knowledge": [
        "{component} は {tech} {v} を使っている。{field} がパーティションキーで、欠けると{problem}になる。",
        "{component} の {tech} はデフォルトで {n} 回リトライするため、{problem}が起きていた。",
    ],
    "decision": [
        "決定: {component} は {tech} {v} に移行する。理由: {reason}。",
        "{component} では {field} を残し、{action}ことにした。理由: {reason}。",
    ],
    "preference": [
        "{component} では手書きスクリプトより {tech} を使う。変更は{person}がレビューする。",
        "{component} の PR は小さく。{problem}のテストを必ず含めること。",
    ],
    "idea": ["アイデア: {action}ば {component} の{problem}を避けられるかもしれない。"],
    "profile": ["主に {component} と {tech} を担当。{problem}のアラートの当番。"],
}
EN_TITLES = ["{component}: {problem}", "{problem} in {component}", "{tech} {v} for {component}", "{component} notes"]
JA_TITLES = ["{component}の{problem}", "{component}: {tech} {v}", "{component}メモ"]

EN_QUERIES = [
    "how did we fix the {problem} in the {component}?",
    "{component} {problem}",
    "why did we choose {tech} for the {component}?",
    "what is the timeout for the {component}",
    "{tech} {problem} workaround",
    "decision about {component}",
    "lessons about {problem}",
    "{component} keeps failing with {problem} after {tech} upgrade",
]
JA_QUERIES = [
    "{component}の{problem}はどう直した？",
    "{component} {problem}",
    "{component}に {tech} を選んだ理由",
    "{problem}の回避策",
    "{component}についての決定",
]

PII_SNIPPETS = [
    "Contact {name}.{last}@example.com if it happens again.",
    "Call the vendor at +1 415-555-01{n2} for escalation.",
    "The leaked key was sk_live_{hex24}; it has been rotated.",
    "Ping {name} on +81 90-1234-56{n2} (after hours).",
    "Used token ghp_{hex36} for the CI bot temporarily.",
    "{name}.{last}@corp.example.org reported it.",
]


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
