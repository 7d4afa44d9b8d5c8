"""The vocabulary of the synthetic corpus: repository and person names, EN/JA notes, titles,
queries, and the PII snippets of the write benchmark. Data only; ``corpus`` draws from it."""

# fmt: off

REPO_PREFIX = [
    "payments", "web", "mobile", "search", "billing", "auth", "data", "infra", "ml", "docs", "api", "notify",
    "ledger", "catalog", "checkout", "identity", "analytics", "gateway",
]
REPO_SUFFIX = ["api", "frontend", "service", "worker", "platform", "pipeline", "sdk", "core", "jobs", "app"]
FIRST_NAMES = [
    "aiko", "ben", "chen", "dana", "emi", "farid", "gus", "hana", "ivan", "jun", "kate", "liam", "mei", "nils",
    "olga", "priya", "quinn", "ren", "sora", "tom", "uma", "vik", "wen", "yuki",
]

EN = {
    "component": [
        "database connection pool", "Redis cache", "Celery worker", "Kafka consumer", "CI pipeline", "Docker build",
        "Kubernetes deployment", "nginx ingress", "auth service", "payment webhook", "search index",
        "GraphQL gateway", "React frontend", "mobile release build", "Terraform state", "S3 upload",
        "cron scheduler", "gRPC client", "OpenTelemetry exporter", "feature flag service", "migration runner",
        "rate limiter", "session store", "email sender", "PDF renderer", "image resizer", "websocket server",
        "billing export", "audit log", "Elasticsearch cluster",
    ],
    "problem": [
        "timeout", "memory leak", "deadlock", "flaky test", "race condition", "N+1 query", "certificate expiry",
        "rate limit errors", "disk full", "slow cold start", "connection reset", "duplicate messages",
        "stale cache entries", "OOM kill", "clock skew", "schema drift", "high p99 latency", "lock contention",
        "retry storm", "unicode normalisation bug", "timezone off-by-one", "missing index", "dependency conflict",
        "broken source map",
    ],
    "action": [
        "raised the pool size to {n}", "added a composite index on ({a}, {b})", "pinned {tech} to {v}",
        "added retries with exponential backoff", "moved the job to a dedicated queue",
        "set the timeout to {n} seconds", "switched to streaming reads", "batched the writes by {n}",
        "enabled connection health checks", "split the migration into two steps", "replaced polling with a webhook",
        "cached the result for {n} minutes", "added a circuit breaker", "upgraded {tech} to {v}",
        "turned on idempotency keys", "rewrote the query without the subquery",
        "increased the worker concurrency to {n}", "added a canary stage before production",
        "made the test use a frozen clock",
    ],
    "tech": [
        "PostgreSQL", "Redis", "Kafka", "Celery", "Django", "React", "Terraform", "nginx", "gRPC", "Node", "Python",
        "Go", "Rust", "Kotlin", "Swift", "pgvector", "Elasticsearch", "RabbitMQ", "Sentry", "Prometheus", "Grafana",
        "Vite", "webpack", "pytest", "Playwright",
    ],
    "field": [
        "tenant_id", "created_at", "user_id", "status", "order_id", "amount", "currency", "email_hash",
        "external_ref", "updated_at", "region", "sku",
    ],
    "person": [
        "the on-call engineer", "the platform team", "the payments team", "our SRE", "the mobile team",
        "the data team", "the security reviewer", "the tech lead",
    ],
    "reason": [
        "it halves the p95 latency", "it keeps the API backwards compatible",
        "it removes a single point of failure", "the vendor SDK is unmaintained", "it is easier to test",
        "it saves about {n} dollars a month", "it avoids a full table scan", "auditors asked for it",
        "it matches what the other services do",
    ],
}
JA = {
    "component": [
        "データベース接続プール", "Redis キャッシュ", "Celery ワーカー", "Kafka コンシューマー", "CI パイプライン",
        "Docker ビルド", "Kubernetes デプロイ", "認証サービス", "決済 Webhook", "検索インデックス",
        "フロントエンドのビルド", "モバイルのリリースビルド", "Terraform の状態管理", "定期実行ジョブ",
        "メール送信", "画像リサイズ", "監査ログ", "レートリミッター", "セッションストア", "請求エクスポート",
    ],
    "problem": [
        "タイムアウト", "メモリリーク", "デッドロック", "不安定なテスト", "競合状態", "N+1 クエリ",
        "証明書の期限切れ", "レート制限エラー", "ディスク容量不足", "接続リセット", "メッセージの重複",
        "古いキャッシュ", "OOM による強制終了", "時刻のずれ", "スキーマの不一致", "ロック競合", "リトライの嵐",
        "タイムゾーンのずれ", "インデックス不足", "依存関係の衝突",
    ],
    "action": [
        "接続プールを {n} に増やした", "({a}, {b}) に複合インデックスを追加した", "{tech} を {v} に固定した",
        "指数バックオフ付きのリトライを入れた", "ジョブを専用キューに移した", "タイムアウトを {n} 秒にした",
        "書き込みを {n} 件ずつまとめた", "接続のヘルスチェックを有効にした", "マイグレーションを二段階に分けた",
        "ポーリングを Webhook に置き換えた", "結果を {n} 分キャッシュした", "サーキットブレーカーを入れた",
        "{tech} を {v} に上げた", "冪等キーを必須にした", "サブクエリを使わない形に書き直した",
        "本番の前にカナリア段階を追加した", "テストで固定時計を使うようにした",
    ],
    "tech": EN["tech"],
    "field": EN["field"],
    "person": ["当番のエンジニア", "基盤チーム", "決済チーム", "SRE", "モバイルチーム", "データチーム", "テックリード"],
    "reason": [
        "p95 レイテンシが半分になる", "API の後方互換性を保てる", "単一障害点がなくなる",
        "ベンダー SDK が保守されていない", "テストしやすい", "月に約 {n} ドル節約できる",
        "全件スキャンを避けられる", "監査で求められた",
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
    "how did we fix the {problem} in the {component}?", "{component} {problem}",
    "why did we choose {tech} for the {component}?", "what is the timeout for the {component}",
    "{tech} {problem} workaround", "decision about {component}", "lessons about {problem}",
    "{component} keeps failing with {problem} after {tech} upgrade",
]
JA_QUERIES = [
    "{component}の{problem}はどう直した？", "{component} {problem}", "{component}に {tech} を選んだ理由",
    "{problem}の回避策", "{component}についての決定",
]

PII_SNIPPETS = [
    "Contact {name}.{last}@example.com if it happens again.",
    "Call the vendor at +1 415-555-01{n2} for escalation.",
    "The leaked key was sk_live_{hex24}; it has been rotated.", "Ping {name} on +81 90-1234-56{n2} (after hours).",
    "Used token ghp_{hex36} for the CI bot temporarily.", "{name}.{last}@corp.example.org reported it.",
]
# fmt: on
