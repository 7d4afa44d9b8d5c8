"""Traffic at rising concurrency against the whole stack on loopback, until p95 passes 200 ms.

    .venv/bin/python bench/load_test.py [--memories 1500] [--seconds 20] [--levels 1,2,4,8,16,32]
    .venv/bin/python bench/load_test.py --tenants 1 --tokens-per-tenant 4 --search-share 1 ...

Seeds tenants (three of 60/30/10 % of ``--memories`` by default, or one) with generated English and
Japanese notes in four repositories, embedded, and ``--tokens-per-tenant`` tokens each; starts
uvicorn (``WEB_CONCURRENCY`` processes) and a Celery worker as ``make run`` does, with the default
rate limits; then drives the API from a second process with closed-loop clients, each holding one
token as one agent does (client n the n-th token, round robin). By default 70 % search
(``--search-share``), 25 % writes, 5 % other reads (list, read one, decisions, context). Each level
runs for ``--seconds``; the run stops after the first level whose p95 passes 200 ms, or after the
last level (bounded in time and requests). Afterwards every acknowledged write is looked up in the
database. Uses its own embedded PostgreSQL (port 54335, data in .data/loadtest) and Redis db 10.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._plots import concurrency_plot  # noqa: E402
from bench._stack import bench_stack, process_tree_cpu, speed_probe, start_celery_worker, start_uvicorn, write_section  # noqa: E402
from bench._stats import percentiles  # noqa: E402
from bench.api_latency import ACTIONS, TOPICS  # noqa: E402

PORT = 8035
P95_LIMIT_MS = 200
MAX_REQUESTS_PER_LEVEL = 20_000


SHARES = {1: (1.0,), 3: (0.6, 0.3, 0.1)}
KINDS = ("lesson", "note", "decision", "conclusion")
SEED_BATCH = 500


def seed(memories: int, tenant_count: int, tokens_per_tenant: int) -> list[dict]:
    """``tenant_count`` tenants sharing ``memories`` embedded notes (``SHARES``), each with
    ``tokens_per_tenant`` read-write tokens; one entry per token, ordered so that consecutive
    tokens belong to different tenants."""
    from django.db import transaction

    from bench.perf.corpus import JA_SHARE, NOW, make_note
    from memory_service.memories.embedding import embed_memories, pending_memory_ids
    from memory_service.memories.services import memory_create_many
    from tenants.access import Principal
    from tenants.context import tenant_context
    from tenants.services import tenant_create, token_create

    rng = random.Random(11)
    by_tenant = []
    for index, share in enumerate(SHARES[tenant_count]):
        tenant = tenant_create(slug=f"load-{index}-{int(time.time())}")
        raws = [
            token_create(tenant=tenant, actor="system:bench", name=f"load-{n}",
                         permissions=["memory:read", "memory:write"]).raw
            for n in range(tokens_per_tenant)
        ]  # fmt: skip
        principal = Principal.operator(tenant=tenant, actor="system:bench")
        items = []
        for i in range(int(memories * share)):
            kind = rng.choice(KINDS)
            title, text, tags = make_note(rng, kind, ja=rng.random() < JA_SHARE, date=NOW)
            items.append({"scope": "repository", "repository": f"repo-{i % 4}", "kind": kind,
                          "title": title, "text": f"{text} (#{i})", "tags": tags})  # fmt: skip
        with tenant_context(tenant.id):
            for start in range(0, len(items), SEED_BATCH):
                with transaction.atomic():
                    results = memory_create_many(principal=principal, items=items[start : start + SEED_BATCH])
                refused = [r for r in results if isinstance(r, Exception)]
                if refused:
                    raise RuntimeError(f"seeding refused {len(refused)} notes, e.g. {refused[0]}")
            ids = pending_memory_ids(tenant_id=str(tenant.id), limit=1_000_000)
            for start in range(0, len(ids), 256):
                embed_memories(tenant_id=str(tenant.id), memory_ids=ids[start : start + 256])
        by_tenant.append([{"slug": tenant.slug, "token": raw} for raw in raws])
    return [entry for round_ in zip(*by_tenant, strict=True) for entry in round_]


def drive_level(
    url: str, tokens: list[dict], concurrency: int, seconds: float, seed_value: int, search_share: float = 0.70
) -> dict:
    """``concurrency`` closed-loop clients (threads, one connection each) for ``seconds``, client n
    holding ``tokens[n % len(tokens)]``; every request's kind, latency and status."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from bench.perf.corpus import JA_SHARE, make_query

    samples, written = [], []
    deadline = time.perf_counter() + seconds

    def client_loop(n: int) -> None:
        local = random.Random(seed_value * 1000 + n)
        headers = {"Authorization": f"Bearer {tokens[n % len(tokens)]['token']}"}
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.perf_counter() < deadline and len(samples) < MAX_REQUESTS_PER_LEVEL:
                repository = f"repo-{local.randrange(4)}"
                roll = local.random()
                started = time.perf_counter()
                try:
                    if roll < search_share:
                        kind = "search"
                        body = {"query": make_query(local, ja=local.random() < JA_SHARE), "repository": repository}
                        response = http.post("/api/v1/search", headers=headers, json=body)
                    elif roll < search_share + (1 - search_share) * 25 / 30:
                        kind = "write"
                        text = (
                            f"Load {n}-{len(samples)}: {local.choice(TOPICS)} {local.choice(ACTIONS)} {local.random()}"
                        )
                        body = {"scope": "repository", "repository": repository, "kind": "lesson", "text": text}
                        response = http.post("/api/v1/memories", headers=headers, json=body)
                    else:
                        kind = "other"
                        path, params = local.choice([
                            ("/api/v1/memories", {"repository": repository, "limit": 20}),
                            ("/api/v1/decisions", {"repository": repository}),
                            ("/api/v1/context", {"repository": repository, "user": "u1"}),
                        ])  # fmt: skip
                        response = http.get(path, headers=headers, params=params)
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                samples.append((kind, (time.perf_counter() - started) * 1000, status))
                if kind == "write" and status == 201:
                    written.append(response.json()["id"])

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(client_loop, range(concurrency)))
    return {"concurrency": concurrency, "elapsed": time.perf_counter() - began, "samples": samples, "written": written}


def drive(args) -> None:
    """The second process: runs the levels and prints one JSON line per level."""
    tokens = json.loads(Path(args.tokens_file).read_text())
    # Warm-up, not reported: every web process loads the embedding model and fills its pool.
    drive_level(args.url, tokens, 4, 10, 0)
    pids = json.loads(args.cpu_pids or "{}")
    for level, concurrency in enumerate(int(c) for c in args.levels.split(",")):
        before = process_tree_cpu(pids)
        result = drive_level(args.url, tokens, concurrency, args.seconds, level + 1, args.search_share)
        result["cpu_s"] = {name: used - before[name] for name, used in process_tree_cpu(pids).items()}
        print(json.dumps(result), flush=True)
        latencies = [ms for _, ms, _ in result["samples"]]
        if latencies and percentiles(latencies)[1] > P95_LIMIT_MS:
            break


def start_worker(log_path: Path) -> subprocess.Popen:
    options = [
        "--loglevel", "WARNING", "--concurrency", "2", "-Q", "celery,exports,rescore",
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    return start_celery_worker(options, env={"OPENBLAS_NUM_THREADS": "1"}, log_path=log_path)


def missing_writes(ids: list[str]) -> int:
    from django.db import connections

    found = 0
    with connections["admin"].cursor() as cursor:
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            cursor.execute("SELECT count(*) FROM memories_memory WHERE id = ANY(%s::uuid[])", [chunk])
            found += cursor.fetchone()[0]
    return len(ids) - found


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--levels", default="1,2,4,8,16,32")
    parser.add_argument(
        "--search-share", type=float, default=0.70, help="share of searches; the rest 25:5 writes and other reads"
    )
    parser.add_argument("--tenants", type=int, choices=sorted(SHARES), default=3)
    parser.add_argument("--tokens-per-tenant", type=int, default=1)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "load_test.md"))
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--tokens-file", help=argparse.SUPPRESS)
    parser.add_argument("--cpu-pids", help=argparse.SUPPRESS)
    return parser.parse_args()


def run_levels(args) -> dict:
    """Seed the tenants, serve them with a worker, drive every level from a second process; the
    levels' raw samples, the acknowledged writes and how many of them are missing afterwards."""
    os.environ["WEB_CONCURRENCY"] = str(args.web_workers)
    load_before = os.getloadavg()
    with bench_stack("loadtest", pg_port=54335, redis_db=10) as profile:
        from django.db import connections

        started = time.perf_counter()
        tokens = seed(args.memories, args.tenants, args.tokens_per_tenant)
        seeded_s = time.perf_counter() - started
        # What autovacuum does within minutes of an import (the term counts' rows are rewritten by
        # every bulk request, each memory once more when it is embedded), so that it does not run in
        # the middle of a level.
        with connections["admin"].cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        connections.close_all()
        probe_ms = speed_probe()
        tokens_file = profile.dir / "tokens.json"
        tokens_file.write_text(json.dumps(tokens))
        # Rate limits at their default, as a deployment runs (api_latency's server turns them off).
        server = start_uvicorn(PORT, env={"PUBLIC_BASE_URL": f"http://127.0.0.1:{PORT}"})
        worker = start_worker(profile.dir / "logs" / "worker.log")
        postmaster = int((profile.pgdata / "postmaster.pid").read_text().split()[0])
        pids = {"web": server.pid, "postgres": postmaster, "worker": worker.pid}  # CPU accounted per level
        try:
            driver = subprocess.run(
                [sys.executable, __file__, "--drive", "--url", f"http://127.0.0.1:{PORT}", "--tokens-file",
                 str(tokens_file), "--levels", args.levels, "--seconds", str(args.seconds),
                 "--search-share", str(args.search_share), "--cpu-pids", json.dumps(pids)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
        finally:
            worker.terminate()
            server.terminate()
            worker.wait(timeout=60)
            server.wait(timeout=30)
        raw = [json.loads(line) for line in driver.stdout.splitlines() if line.startswith("{")]
        acknowledged = [i for level in raw for i in level["written"]]
        lost = missing_writes(acknowledged)
    load_after = os.getloadavg()
    return {
        "raw": raw, "acknowledged": acknowledged, "lost": lost, "seeded_s": seeded_s, "probe_ms": probe_ms,
        "load_before": load_before, "load_after": load_after,
    }  # fmt: skip


def level_figures(level: dict) -> dict:
    """Throughput, percentiles (all, searches, writes) and errors of one level's samples."""
    samples = level["samples"]
    latencies = [ms for _, ms, _ in samples]
    p50, p95, p99 = percentiles(latencies)
    by_kind = {kind: [ms for k, ms, _ in samples if k == kind] for kind in ("search", "write", "other")}
    return {
        "concurrency": level["concurrency"], "requests": len(samples),
        "throughput": len(samples) / level["elapsed"], "p50": p50, "p95": p95, "p99": p99,
        "search_p50": percentiles(by_kind["search"])[0] if by_kind["search"] else float("nan"),
        "search_p95": percentiles(by_kind["search"])[1] if by_kind["search"] else float("nan"),
        "write_p95": percentiles(by_kind["write"])[1] if by_kind["write"] else float("nan"),
        "errors": sum(1 for _, _, status in samples if not 200 <= status < 300),
        "errors_by_status": ", ".join(
            f"{count} × {status or 'no answer'}"
            for status, count in sorted(Counter(s for _, _, s in samples if not 200 <= s < 300).items())
        ) or "0",
        "server_errors": sum(1 for _, _, status in samples if status == 0 or status >= 500),
        "cpu_ms": {name: used * 1000 / max(len(samples), 1) for name, used in level.get("cpu_s", {}).items()},
    }  # fmt: skip


def mix(args) -> str:
    """The traffic of a run in words."""
    if args.search_share >= 1:
        return "searches alone"
    return f"mixed traffic ({args.search_share:.0%} search, the rest 25:5 writes and other reads)"


def setup(args, seeded_s: float) -> str:
    """Who the clients are: the tenants, their memories and tokens."""
    from django.conf import settings

    tokens = args.tenants * args.tokens_per_tenant
    if args.tenants == 1:
        data = f"One tenant of {args.memories:,} embedded memories"
    else:
        shares = "/".join(f"{share:.0%}".rstrip("%") for share in SHARES[args.tenants])
        data = f"{args.tenants} tenants ({shares} % of {args.memories:,} embedded memories)"
    return (
        f"{data}, seeded in {seeded_s:.0f} s through the bulk write path, then vacuumed; generated English and "
        f"Japanese notes (30 % Japanese) in four repositories; {tokens} tokens, each client holding one (client n the "
        f"n-th of {tokens}); rate limits at their default (`RATE_LIMIT_PER_MINUTE` {settings.RATE_LIMIT_PER_MINUTE})"
    )


def section(args, run: dict, levels: list[dict]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The RESULTS.md section and the headline figures of a run."""
    acknowledged, lost = run["acknowledged"], run["lost"]
    load_before, load_after = run["load_before"], run["load_after"]
    below = [level for level in levels if level["p95"] <= P95_LIMIT_MS]
    best = max(below, key=lambda level: level["throughput"]) if below else None
    png = Path(args.out).with_suffix(".png")
    plotted = concurrency_plot(
        levels, png, title=f"{mix(args).capitalize()} on {os.cpu_count()} cores", limit_ms=P95_LIMIT_MS
    )
    rows = [  # a column without requests of its kind (writes, when searches run alone) shows "—"
        f"| {lv['concurrency']} | {lv['requests']} | {lv['throughput']:.1f} | {lv['p50']:.1f} | {lv['p95']:.1f} | "
        f"{lv['p99']:.1f} | {lv['search_p95']:.1f} | {lv['write_p95']:.1f} | {lv['errors_by_status']} |".replace(
            " nan ", " — "
        )
        for lv in levels
    ]
    report = [
        f"## Load test: {'searches alone' if args.search_share >= 1 else 'mixed traffic'} at rising concurrency",
        "",
        f"Command: `.venv/bin/python bench/load_test.py --memories {args.memories} --seconds {args.seconds:g} "
        f"--levels {args.levels} --tenants {args.tenants} --tokens-per-tenant {args.tokens_per_tenant} "
        f"--web-workers {args.web_workers} --search-share {args.search_share:g}` — "
        f"{datetime.now():%Y-%m-%d %H:%M}, "
        f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before and {load_after[0]:.1f} after; "
        f"speed probe {run['probe_ms']:.1f} ms (`_stack.speed_probe`: CPU to embed one query). "
        f"{setup(args, run['seeded_s'])}. {args.web_workers} uvicorn processes and one Celery worker "
        "(concurrency 2) on the same machine as PostgreSQL; closed-loop clients in a second process after a "
        f"10 s warm-up; {mix(args)}, searches within one repository; each level runs its time and the run "
        f"stops after the first level whose p95 passes {P95_LIMIT_MS} ms. Errors count every answer but 2xx "
        "(a 429 of the rate limit included).",
        "",
        "| clients | requests | req/s | p50 ms | p95 ms | p99 ms | search p95 ms | write p95 ms | errors |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        (
            f"Sustained below a p95 of {P95_LIMIT_MS} ms: **{best['throughput']:.1f} requests/s** at "
            f"{best['concurrency']} clients (p50 {best['p50']:.1f} ms, p95 {best['p95']:.1f} ms), "
            f"{sum(lv['errors'] for lv in below)} errors at or below that load."
            if best
            else f"No level stayed below a p95 of {P95_LIMIT_MS} ms."
        ),  # fmt: skip
    ]
    if args.search_share < 1:
        report.append(f"Acknowledged writes: {len(acknowledged)}; missing from the database afterwards: **{lost}**.")
    if levels and levels[0]["cpu_ms"]:  # the processes' CPU over each level, per request
        cpu = "; ".join(
            f"{lv['concurrency']}: " + " / ".join(f"{ms:.1f}" for ms in lv["cpu_ms"].values()) for lv in levels
        )
        report.append(f"CPU a request, ms ({' / '.join(levels[0]['cpu_ms'])}, from /proc), by clients: {cpu}.")
    report.append("")
    if plotted:
        report += [f"![latency and throughput against concurrency](results/{png.name})", ""]
    return report, headline(args, levels, best, run)


def headline(args, levels: list[dict], best: dict | None, run: dict) -> list[tuple[str, str, str]]:
    """The summary rows of a run: the best level below the limit and the four clients' level; the
    lost writes of a mixed run. The targets are those of searches alone on four tokens."""
    searches = args.search_share >= 1
    figures = [
        (
            f"{mix(args)}, {args.memories:,} memories, {args.web_workers} web processes: most requests/s below p95 "
            f"{P95_LIMIT_MS} ms",
            f"{best['throughput']:.1f} req/s at {best['concurrency']} clients, search p95 {best['search_p95']:.1f} ms"
            if best
            else "no level below the limit",
            "",
        )
    ]
    four = [lv for lv in levels if lv["concurrency"] == 4]
    if four:
        lv = four[0]
        tokens = min(4, args.tenants * args.tokens_per_tenant)
        figures.append((
            f"{mix(args)}, four clients on {tokens} tokens",
            f"{lv['throughput']:.1f} req/s, search p50 {lv['search_p50']:.1f} / p95 {lv['search_p95']:.1f} ms, "
            f"{lv['errors']} errors",
            "≥ 80 searches/s, search p95 ≤ 80 ms (four tokens)" if searches else "",
        ))  # fmt: skip
    if not searches:
        lost = f"{run['lost']} of {len(run['acknowledged']):,}"
        figures.append(("acknowledged writes missing afterwards", lost, "0"))
    return figures


def main() -> None:
    args = parse_args()
    if args.drive:
        return drive(args)
    run = run_levels(args)
    report, figures = section(args, run, [level_figures(level) for level in run["raw"]])
    write_section(args.out, report, figures)


if __name__ == "__main__":
    main()
