"""What the statistics triggers on the memory table cost a write, measured in process.

    .venv/bin/python -m bench.perf.stats_trigger_cost [--blocks 8] [--per-block 40] [--triggers lexeme]

On a fresh embedded database (port 54331, .data/quality, Redis db 6: the quality benchmark's
stack), single writes through ``memory_create`` and bulk writes of 200 (``memory_create_many``, as
``POST /memories/bulk``) alternate in blocks between the triggers enabled and
disabled (``ALTER TABLE … DISABLE TRIGGER``, as the schema owner). Prints p50 per write per mode.
``--triggers owner``: migration 0010's (each owner's memory and term counts); ``lexeme``:
migration 0016's (each owner's document count of each lexeme). The notes are the 1M benchmark's
(``bench.perf.corpus``: one to three sentences, a fifth of them Japanese) in five owners.
"""

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack  # noqa: E402
from bench.perf import corpus  # noqa: E402

TRIGGERS = {
    "owner": ("memory_lexical_stats_insert", "memory_lexical_stats_update", "memory_lexical_stats_delete"),
    "lexeme": ("memory_lexical_terms_insert", "memory_lexical_terms_update", "memory_lexical_terms_delete"),
}


def set_triggers(which: str, enabled: bool) -> None:
    from django.db import connections

    with connections["admin"].cursor() as cursor:
        for name in TRIGGERS[which]:
            cursor.execute(f"ALTER TABLE memories_memory {'ENABLE' if enabled else 'DISABLE'} TRIGGER {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--per-block", type=int, default=40)
    parser.add_argument("--triggers", choices=sorted(TRIGGERS), default="lexeme")
    args = parser.parse_args()
    rng = random.Random(7)

    def note() -> str:
        _title, text, _tags = corpus.make_note(
            rng, "lesson", ja=rng.random() < 0.2, date=datetime(2026, 1, 1, tzinfo=UTC)
        )
        return text

    with bench_stack("quality", pg_port=54331, redis_db=6):
        from memory_service.memories.services import memory_create, memory_create_many
        from tenants.access import Principal
        from tenants.context import tenant_context
        from tenants.services import tenant_create

        tenant = tenant_create(slug=f"trigger-cost-{int(time.time())}")
        principal = Principal.operator(tenant=tenant, actor="system:bench")
        single = {True: [], False: []}
        bulk = {True: [], False: []}
        serial = 0
        for block in range(args.blocks):
            for enabled in (True, False) if block % 2 == 0 else (False, True):
                set_triggers(args.triggers, enabled)
                with tenant_context(tenant.id):
                    for _ in range(args.per_block):
                        serial += 1
                        started = time.perf_counter()
                        memory_create(principal=principal, scope="user", user=f"u{serial % 5}", text=note())
                        single[enabled].append((time.perf_counter() - started) * 1000)
                    items = []
                    for _ in range(200):
                        serial += 1
                        items.append({"scope": "user", "user": f"u{serial % 5}", "text": note()})
                    started = time.perf_counter()
                    memory_create_many(principal=principal, items=items)
                    bulk[enabled].append((time.perf_counter() - started) * 1000 / len(items))
        set_triggers(args.triggers, True)
        for label, values in (("single write", single), ("bulk item (200 per request)", bulk)):
            on, off = statistics.median(values[True]), statistics.median(values[False])
            print(f"{label}: p50 {on:.2f} ms with the triggers, {off:.2f} ms without ({on - off:+.2f} ms)")


if __name__ == "__main__":
    main()
