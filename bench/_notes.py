"""Notes of the write benchmarks that name one person: 200-300-character engineering notes in
English (a given and family name) or Japanese (a family name + さん, sometimes a full name), each
unique by a counter, so that no write is answered as a duplicate."""

import random

EN_NAMES = [
    "Priya Raman", "Daniel Okafor", "Maria Gonzalez", "Tom Becker", "Wei Chen", "Sarah O'Neill",
    "Lukas Novak", "Aisha Khan", "James Whitfield", "Elena Petrova", "Marcus Lindqvist", "Hannah Levy",
]  # fmt: skip
JA_NAMES = ["田中", "佐藤", "鈴木", "高橋", "伊藤", "渡辺", "山本", "中村", "小林", "加藤", "吉田", "山口"]
JA_FULL = ["田中 浩二", "佐藤 美咲", "鈴木 健太", "高橋 由美", "山本 大輔", "中村 彩"]

EN_TEMPLATES = [
    "Per {name}, the pgbouncer pool must stay at 20 connections per node until the replica lag alerts "
    "are fixed; raising it to 40 last week doubled p99 on the billing API. Check with {first} before "
    "touching pool_size in deploy/pgbouncer.ini. (note {n})",
    "{name} confirmed the nightly export job now runs at 02:30 UTC instead of midnight, because the "
    "vacuum on the events table was competing for IO. If the export misses its window again, page "
    "{first} rather than rerunning it by hand. (note {n})",
    "Decision with {name}: we keep Redis as the Celery broker for now and revisit RabbitMQ only if "
    "the queue depth stays above 10k for more than an hour. {first} owns the alert and the dashboard "
    "in grafana/queues.json. (note {n})",
    "Lesson from the outage review led by {name}: the migration added an index without CONCURRENTLY "
    "and locked memories_memory for four minutes. Every new index goes through the checklist {first} "
    "wrote in docs/migrations.md. (note {n})",
]
JA_TEMPLATES = [
    "{name}さんの判断で、pgbouncer のプールは 20 に据え置く。先週 40 に上げたところ billing API の p99 が"
    "倍になったため、レプリカ遅延のアラートが解消するまでは変更しないこと。deploy/pgbouncer.ini の "
    "pool_size を触る前に、必ず{name}さんに確認する。夜間バッチの時間帯は特に接続数が増えるので、"
    "変更する場合は日中に段階的に行い、ダッシュボードで待ち行列の長さを見ながら進めること。(メモ {n})",
    "{name}さんによると、夜間のエクスポートジョブは 0 時ではなく 2 時 30 分 (UTC) に実行されるように"
    "なった。events テーブルの vacuum と IO を取り合っていたのが原因である。再び時間内に終わらなかった"
    "場合は手で再実行せず、{name}さんに連絡すること。ジョブのログは logs/export に残り、失敗した"
    "バッチは翌朝の定例で確認する。リトライ回数は設定ファイルで 3 回に制限している。(メモ {n})",
    "{name}さんと相談した結果、当面は Celery のブローカーとして Redis を使い続け、キューの深さが "
    "1 時間以上 1 万件を超えた場合にのみ RabbitMQ への移行を再検討する。アラートとダッシュボード "
    "(grafana/queues.json) の担当は{name}さん。移行する場合の手順書はまだないので、必要になったら"
    "まず検証環境で負荷試験を行い、その結果を見てから本番の切り替え日を決めること。(メモ {n})",
]


def make_note(rng: random.Random, lang: str, n: int) -> tuple[str, str]:
    """(title, text) of a note in ``lang`` naming one person; unique by ``n``."""
    if lang == "en":
        name = rng.choice(EN_NAMES)
        text = rng.choice(EN_TEMPLATES).format(name=name, first=name.split()[0], n=n)
        return "pgbouncer, exports and queues", text
    name = rng.choice(JA_FULL) if rng.random() < 0.3 else rng.choice(JA_NAMES)
    text = rng.choice(JA_TEMPLATES).format(name=name, n=n)
    return "運用メモ", text
