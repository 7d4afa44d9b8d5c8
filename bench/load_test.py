"""Mixed traffic at rising concurrency against the whole stack on loopback, until p95 passes 200 ms.

    .venv/bin/python bench/load_test.py [--memories 1500] [--seconds 20] [--levels 1,2,4,8,16,32]

Seeds three tenants (embedded memories), starts uvicorn (``WEB_CONCURRENCY`` processes) and a
Celery worker as ``make run`` does, then drives the API from a second process: closed-loop clients,
70 % search (``--search-share``), 25 % writes, 5 % other reads (list, read one, decisions, context). Each level runs for
``--seconds``; the run stops after the first level whose p95 passes 200 ms, or after the last
level (bounded in time and requests). Afterwards every acknowledged write is looked up in the
database. Uses its own embedded PostgreSQL (port 54335, data in .data/loadtest) and Redis db 10.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE))

from bench._stack import bench_stack, start_celery_worker, write_section  # noqa: E402
from bench._stats import percentiles  # noqa: E402
from bench.api_latency import ACTIONS, TOPICS, serve  # noqa: E402

PORT = 8035
P95_LIMIT_MS = 200
MAX_REQUESTS_PER_LEVEL = 20_000


def seed(memories: int) -> list[dict]:
    """Three tenants of different sizes, each with a token and embedded memories in 4 repositories."""
    from memory_service.memories.embedding import embed_memories, pending_memory_ids
    from memory_service.memories.services import memory_create
    from tenants.access import Principal
    from tenants.context import tenant_context
    from tenants.services import tenant_create, token_create

    rng = random.Random(11)
    tenants = []
    for index, share in enumerate((0.6, 0.3, 0.1)):
        tenant = tenant_create(slug=f"load-{index}-{int(time.time())}")
        token = token_create(tenant=tenant, actor="system:bench", name="load",
                             permissions=["memory:read", "memory:write"])  # fmt: skip
        principal = Principal.operator(tenant=tenant, actor="system:bench")
        with tenant_context(tenant.id):
            for i in range(int(memories * share)):
                topic, action = rng.choice(TOPICS), rng.choice(ACTIONS)
                memory_create(
                    principal=principal, scope="repository", repository=f"repo-{i % 4}",
                    kind=rng.choice(["lesson", "note", "decision", "conclusion"]),
                    text=f"Note {i}: for the {topic} we decided to {action} it after incident {rng.randint(1, 999)}.",
                )  # fmt: skip
            ids = pending_memory_ids(tenant_id=str(tenant.id), limit=100_000)
            for start in range(0, len(ids), 256):
                embed_memories(tenant_id=str(tenant.id), memory_ids=ids[start : start + 256])
        tenants.append({"slug": tenant.slug, "token": token.raw, "weight": share})
    return tenants


def drive_level(
    url: str, tenants: list[dict], concurrency: int, seconds: float, seed_value: int, search_share: float = 0.70
) -> dict:
    """``concurrency`` closed-loop clients (threads, one connection each) for ``seconds``; every
    request's kind, latency and status."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    samples, written = [], []
    deadline = time.perf_counter() + seconds

    def client_loop(n: int) -> None:
        local = random.Random(seed_value * 1000 + n)
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.perf_counter() < deadline and len(samples) < MAX_REQUESTS_PER_LEVEL:
                tenant = local.choices(tenants, weights=[t["weight"] for t in tenants])[0]
                headers = {"Authorization": f"Bearer {tenant['token']}"}
                repository = f"repo-{local.randrange(4)}"
                roll = local.random()
                started = time.perf_counter()
                try:
                    if roll < search_share:
                        kind = "search"
                        body = {"query": f"{local.choice(TOPICS)} {local.choice(ACTIONS)}", "repository": repository}
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
    tenants = json.loads(Path(args.tenants_file).read_text())
    # Warm-up, not reported: every web process loads the embedding model and fills its pool.
    drive_level(args.url, tenants, 4, 10, 0)
    for level, concurrency in enumerate(int(c) for c in args.levels.split(",")):
        result = drive_level(args.url, tenants, concurrency, args.seconds, level + 1, args.search_share)
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


def plot(levels: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    xs = [level["concurrency"] for level in levels]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, style in (("p50", "o-"), ("p95", "o--"), ("p99", "o:")):
        ax.plot(xs, [level[key] for level in levels], style, label=f"all requests {key}", color="C0")
    ax.plot(xs, [level["search_p95"] for level in levels], "s--", label="search p95", color="C2")
    ax.plot(xs, [level["write_p95"] for level in levels], "^--", label="write p95", color="C3")
    ax.axhline(P95_LIMIT_MS, color="grey", lw=0.8, ls="-.")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("latency (ms)")
    twin = ax.twinx()
    twin.plot(xs, [level["throughput"] for level in levels], "k-", alpha=0.4, label="throughput")
    twin.set_ylabel("requests/s")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Mixed traffic (70 % search, 25 % write, 5 % other) on 2 cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1500)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--levels", default="1,2,4,8,16,32")
    parser.add_argument(
        "--search-share", type=float, default=0.70, help="share of searches; the rest 25:5 writes and other reads"
    )
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--out", default=str(BASE / "bench" / "results" / "load_test.md"))
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--tenants-file", help=argparse.SUPPRESS)
    return parser.parse_args()


def run_levels(args) -> dict:
    """Seed the tenants, serve them with a worker, drive every level from a second process; the
    levels' raw samples, the acknowledged writes and how many of them are missing afterwards."""
    os.environ["WEB_CONCURRENCY"] = str(args.web_workers)
    os.environ["RATE_LIMIT_PER_MINUTE"] = "0"
    load_before = os.getloadavg()
    with bench_stack("loadtest", pg_port=54335, redis_db=10) as profile:
        from django.db import connections

        started = time.perf_counter()
        tenants = seed(args.memories)
        seeded_s = time.perf_counter() - started
        with connections["admin"].cursor() as cursor:
            cursor.execute("ANALYZE")
        connections.close_all()
        tenants_file = profile.dir / "tenants.json"
        tenants_file.write_text(json.dumps(tenants))
        server = serve(PORT)
        worker = start_worker(profile.dir / "logs" / "worker.log")
        try:
            driver = subprocess.run(
                [sys.executable, __file__, "--drive", "--url", f"http://127.0.0.1:{PORT}", "--tenants-file",
                 str(tenants_file), "--levels", args.levels, "--seconds", str(args.seconds),
                 "--search-share", str(args.search_share)],
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
        "raw": raw, "acknowledged": acknowledged, "lost": lost, "seeded_s": seeded_s,
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
        "search_p95": percentiles(by_kind["search"])[1] if by_kind["search"] else float("nan"),
        "write_p95": percentiles(by_kind["write"])[1] if by_kind["write"] else float("nan"),
        "errors": sum(1 for _, _, status in samples if not 200 <= status < 300),
        "server_errors": sum(1 for _, _, status in samples if status == 0 or status >= 500),
    }  # fmt: skip


def section(args, run: dict, levels: list[dict]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """The RESULTS.md section and the headline figures of a run."""
    acknowledged, lost, seeded_s = run["acknowledged"], run["lost"], run["seeded_s"]
    load_before, load_after = run["load_before"], run["load_after"]
    below = [level for level in levels if level["p95"] <= P95_LIMIT_MS]
    best = max(below, key=lambda level: level["throughput"]) if below else None
    png = Path(args.out).with_suffix(".png")
    plotted = plot(levels, png)
    rows = [
        f"| {lv['concurrency']} | {lv['requests']} | {lv['throughput']:.1f} | {lv['p50']:.1f} | {lv['p95']:.1f} | "
        f"{lv['p99']:.1f} | {lv['search_p95']:.1f} | {lv['write_p95']:.1f} | {lv['errors']} |"
        for lv in levels
    ]
    report = [
        "## Load test: mixed traffic at rising concurrency",
        "",
        f"Command: `.venv/bin/python bench/load_test.py --memories {args.memories} --seconds {args.seconds:g} "
        f"--levels {args.levels} --web-workers {args.web_workers} --search-share {args.search_share:g}` — "
        f"{datetime.now():%Y-%m-%d %H:%M}, "
        f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before and {load_after[0]:.1f} after. "
        f"Three tenants (60/30/10 % of {args.memories} embedded memories, seeded in {seeded_s:.0f} s), "
        f"{args.web_workers} uvicorn processes and one Celery worker (concurrency 2) on the same machine as "
        "PostgreSQL; closed-loop clients in a second process after a 10 s warm-up; "
        f"{args.search_share:.0%} search, the rest 25:5 writes and list/read/decisions/context; each level runs its "
        f"time and the run stops after the first level whose p95 passes {P95_LIMIT_MS} ms.",
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
        f"Acknowledged writes: {len(acknowledged)}; missing from the database afterwards: **{lost}**.",
        "",
    ]
    if plotted:
        report += [f"![latency and throughput against concurrency](results/{png.name})", ""]
    mix = "searches alone" if args.search_share >= 1 else f"mixed traffic ({args.search_share:.0%} search)"
    figures = [
        (
            f"{mix}, {args.memories:,} memories, {args.web_workers} web processes: most requests/s below p95 "
            f"{P95_LIMIT_MS} ms",
            f"{best['throughput']:.1f} req/s at {best['concurrency']} clients, search p95 {best['search_p95']:.1f} ms"
            if best
            else "no level below the limit",
            "≥ 80 searches/s with four clients, search p95 ≤ 80 ms",
        ),
        ("acknowledged writes missing afterwards", f"{lost} of {len(acknowledged):,}", "0"),
    ]
    four = [lv for lv in levels if lv["concurrency"] == 4]
    if four:
        lv = four[0]
        figures.insert(1, (f"{mix}, four clients", f"{lv['throughput']:.1f} req/s, search p95 {lv['search_p95']:.1f} "
                           f"ms, {lv['errors']} errors", "search p95 ≤ 80 ms"))  # fmt: skip
    return report, figures


def main() -> None:
    args = parse_args()
    if args.drive:
        return drive(args)
    run = run_levels(args)
    levels = [level_figures(level) for level in run["raw"]]
    report, figures = section(args, run, levels)
    write_section(args.out, report, figures)


if __name__ == "__main__":
    main()
