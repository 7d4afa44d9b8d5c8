"""Does the exact k-NN evaluate the distance (and detoast the vector) once or twice per row?

The app orders by ``F("distance") + 0`` while selecting ``distance``: two expressions. Ordering by
an annotation that already holds ``distance + 0`` keeps the exact plan with one evaluation. EXPLAIN
(ANALYZE, BUFFERS) of the three forms on the largest scopes of the loaded corpus, as the app role.

    BENCH_APP_DIR=.data/bench/app-<commit> .venv/bin/python -m bench.perf.single_eval
"""

import argparse
import json
import re

from bench._stats import summary
from bench.perf import corpus, measure, stack
from bench.perf.results import load_results, save_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    with stack.database():
        from django.db import connection, transaction
        from django.db.models import F
        from django.db.models.functions import Cast
        from pgvector.django import CosineDistance, VectorField

        from memory_service.memories.models import Memory, MemoryEmbedding
        from memory_service.retrieval import search as S
        from tenants.authentication import authenticate_principal

        tenants = json.loads(stack.TOKENS_FILE.read_text())
        total = Memory.objects.using("admin").count()
        size = min((10_000, 100_000, 1_000_000), key=lambda s: abs(s - total))
        items = [
            i for i in measure.workload(corpus.tenant_specs(), tenants, size, 60, seed=91) if i["class"] == "big (10%)"
        ][:5]
        backend = S.get_backend()
        out = {}
        for item in items:
            vector = backend.embed_query(item["query"])
            for name in (
                "app: select distance, ORDER BY distance + 0",
                "annotate d = distance + 0, ORDER BY d",
                "ORDER BY distance (no + 0)",
            ):
                with transaction.atomic():
                    token = authenticate_principal(item["token"])
                    scoped = Memory.objects.for_tenant(token.tenant).filter(
                        S.scope_filter(principal=token, user=item["user"], repository=item["repository"], session="")
                    )
                    distance = CosineDistance(Cast("embedding", output_field=VectorField(dimensions=512)), vector)
                    rows = MemoryEmbedding.objects.for_tenant(token.tenant).filter(model="usem3", memory__in=scoped)
                    if name.startswith("app"):
                        qs = rows.annotate(distance=distance).order_by(F("distance") + 0)
                        qs = qs.values_list("memory_id", "distance")
                    elif name.startswith("annotate"):
                        qs = rows.annotate(d=distance + 0).order_by("d").values_list("memory_id", "d")
                    else:
                        qs = rows.annotate(distance=distance).order_by("distance").values_list("memory_id", "distance")
                    sql, params = qs[:50].query.sql_with_params()
                    with connection.cursor() as cur:
                        cur.execute(sql, params)  # warm
                        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
                        plan = cur.fetchone()[0]
                        plan = json.loads(plan) if isinstance(plan, str) else plan
                        cur.execute("EXPLAIN (COSTS OFF) " + sql, params)
                        text = "\n".join(r[0] for r in cur.fetchall())
                top = plan[0]["Plan"]
                rows_in = _scan_rows(top)
                buffers = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
                entry = out.setdefault(name, {"exec_ms": [], "buffers_per_row": [], "uses_hnsw": 0, "plan": ""})
                entry["exec_ms"].append(plan[0]["Execution Time"])
                entry["buffers_per_row"].append(round(buffers / max(rows_in, 1), 2))
                entry["uses_hnsw"] += "memory_embedding_usem3_hnsw" in text
                entry["plan"] = re.sub(r"'\[[^\]]{200,}\]'", "'[…]'", text)
        figures = {
            name: {
                "exec_ms": summary(v["exec_ms"]),
                "buffers_per_row": v["buffers_per_row"],
                "uses_hnsw": f"{v['uses_hnsw']}/{len(items)}",
                "plan": v["plan"],
            }
            for name, v in out.items()
        }
        print(json.dumps(figures, indent=1))
        results = load_results()
        results.setdefault("single_eval", {})[str(size)] = figures | {
            "command": "cd /work/main && BENCH_APP_DIR=.data/bench/app-748483a "
            ".venv/bin/python -m bench.perf.single_eval"
        }
        save_results(results)


def _scan_rows(node) -> int:
    """Rows coming out of the join under the sort (= vectors read)."""
    if node.get("Node Type") in ("Nested Loop", "Hash Join", "Merge Join"):
        return node.get("Actual Rows", 0)
    for child in node.get("Plans", []):
        found = _scan_rows(child)
        if found:
            return found
    return 0


if __name__ == "__main__":
    main()
