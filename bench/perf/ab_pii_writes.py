"""REST write latency and bulk write rate of two (or more) frozen copies of the application, by
note language (English / Japanese), alternated on one database; /healthz alongside as a noise gauge.

    .venv/bin/python -m bench.perf.ab_pii_writes .data/bench/app-<old> .data/bench/app-<new> \
        [--rounds 5] [--writes 200] [--bulk-requests 4] [--bulk-size 100] [--json FILE]

Written for the PII name tier (an English NER model and Sudachi for Japanese on every write);
``ab_rest --writes`` sends the corpus's mixed-language notes, this one keeps the languages apart.
Like ``ab_rest``, whole runs are alternated: each round starts uvicorn on 127.0.0.1:8030 from each
copy in turn (order reversed every round), rate limits off (``NO_LIMITS``), and per server:

1. ``--writes`` English and ``--writes`` Japanese POST /api/v1/memories, alternating EN, JA
   request by request (10 of each first, not counted), and one GET /healthz after each EN/JA
   pair (the first 10 not counted);
2. POST /api/v1/memories/bulk, ``--bulk-size`` items per request, one language per request,
   alternating EN, JA (one of each first, not counted), ``--bulk-requests`` per language.

Notes are 200-300-character engineering notes with one person's name in them (English: a given
and family name; Japanese: a family name + さん, sometimes a full name); every text carries a
counter, so no write is answered as a duplicate (each response's status is checked: 201). The
same texts go to every variant of a round; each server's memories are deleted after it stops
(as the schema owner, then VACUUM ANALYZE) and the bench Redis db emptied of their embedding
tasks, outside the timings. Needs the bench database running with a corpus loaded, as ``ab_rest``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path

from bench._notes import make_note
from bench._stats import summary
from bench.perf import corpus, stack
from bench.perf.ab_rest import NO_LIMITS, delete_written, variant
from bench.perf.client import KeepAliveClient

LANGS = ("en", "ja")


def make_body(rng: random.Random, spec, lang: str, n: int) -> dict:
    title, text = make_note(rng, lang, n)
    return {
        "scope": "repository",
        "repository": rng.choice(spec.repositories),
        "kind": rng.choice(["note", "decision", "lesson", "knowledge"]),
        "title": title,
        "text": text,
        "tags": ["bench", f"pii-{lang}"],
    }


def label(spec: str) -> str:
    """Short name of a variant: its app copy's directory name, plus ``+env`` when it sets any."""
    app_dir, env = variant(spec)
    return app_dir.name + ("+" + ",".join(env) if env else "")


def run_server(args, specs, sizes, tenants, round_: int) -> dict:
    """The timed work against the server on WEB_PORT: writes + healthz, then bulk. Same texts for
    every variant of a round (seeded by the round)."""
    rng = random.Random(1000 + round_)
    base = (round_ + 1) * 1_000_000
    lat: dict[str, list[float]] = defaultdict(list)
    codes: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    ids: list[str] = []
    masked: dict[str, int] = defaultdict(int)
    with KeepAliveClient(timeout=600) as client:
        # 1. single writes, EN/JA alternating, one /healthz per pair
        for k in range(2 * (args.writes + 10)):
            lang = LANGS[k % 2]
            spec = specs[rng.choices(range(len(specs)), weights=sizes)[0]]
            body = make_body(rng, spec, lang, base + k)
            headers = {"Authorization": f"Bearer {tenants[spec.slug]['token']}"}
            t = time.perf_counter()
            response = client.post("/api/v1/memories", json=body, headers=headers)
            ms = (time.perf_counter() - t) * 1000
            codes[f"write_{lang}"][response.status_code] += 1
            if response.status_code in (200, 201):
                data = response.json()
                ids.append(data["id"])
                masked[lang] += sum(data.get("pii", {}).values())
            if k >= 20 and response.status_code == 201:
                lat[f"write_{lang}"].append(ms)
            if k % 2 == 1:
                t = time.perf_counter()
                response = client.request("GET", "/healthz")
                ms = (time.perf_counter() - t) * 1000
                codes["healthz"][response.status_code] += 1
                if k >= 20 and response.status_code == 200:
                    lat["healthz"].append(ms)
        # 2. bulk, one language per request, alternating
        bulk_items: dict[str, int] = defaultdict(int)
        bulk_seconds: dict[str, float] = defaultdict(float)
        bulk_rates: dict[str, list[float]] = defaultdict(list)
        n = base + 500_000
        for k in range(2 * (args.bulk_requests + 1)):
            lang = LANGS[k % 2]
            spec = specs[rng.choices(range(len(specs)), weights=sizes)[0]]
            items = []
            for _ in range(args.bulk_size):
                items.append(make_body(rng, spec, lang, n))
                n += 1
            headers = {"Authorization": f"Bearer {tenants[spec.slug]['token']}"}
            t = time.perf_counter()
            response = client.post("/api/v1/memories/bulk", json={"items": items}, headers=headers)
            seconds = time.perf_counter() - t
            codes[f"bulk_{lang}"][response.status_code] += 1
            created = 0
            if response.status_code == 200:
                for result in response.json()["results"]:
                    codes[f"bulk_item_{lang}"][result["status"]] += 1
                    if "memory" in result:
                        ids.append(result["memory"]["id"])
                    created += result["status"] == 201
            if k >= 2 and created:
                bulk_items[lang] += created
                bulk_seconds[lang] += seconds
                bulk_rates[lang].append(created / seconds)
    out = {kind: summary(values) for kind, values in lat.items()}
    out |= {
        f"bulk_{lang}": {
            "items": bulk_items[lang],
            "seconds": round(bulk_seconds[lang], 2),
            "per_s": round(bulk_items[lang] / bulk_seconds[lang], 1) if bulk_seconds[lang] else None,
            "per_request_per_s": [round(r, 1) for r in bulk_rates[lang]],
        }
        for lang in LANGS
    }
    out["codes"] = {kind: dict(c) for kind, c in codes.items()}
    out["pii_masked"] = dict(masked)
    out["samples"] = {kind: [round(v, 3) for v in values] for kind, values in lat.items()}
    out["ids"] = ids
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="+", help="DIR[@NAME=VALUE,...]: first the baseline")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=200, help="POST /api/v1/memories per language per round")
    parser.add_argument("--bulk-requests", type=int, default=4, help="bulk requests per language per round")
    parser.add_argument("--bulk-size", type=int, default=100)
    parser.add_argument("--size", type=int, default=10_000, help="corpus size loaded (tenant weights)")
    parser.add_argument("--json", default="", help="also write every round's figures to this file")
    args = parser.parse_args()
    specs = corpus.tenant_specs()
    sizes = corpus.tenant_sizes(args.size)
    tenants = json.loads(stack.TOKENS_FILE.read_text())
    rounds: dict[str, list[dict]] = {spec: [] for spec in args.variants}
    for round_ in range(args.rounds):
        for spec in args.variants if round_ % 2 == 0 else list(reversed(args.variants)):
            app_dir, env = variant(spec)
            load_before = Path("/proc/loadavg").read_text().split()[:3]
            started = time.strftime("%H:%M:%S", time.gmtime())
            process = stack.start_web(extra_env=NO_LIMITS | env, app_dir=app_dir)
            try:
                helper = stack.wait_for_masking_helper()
                figures = run_server(args, specs, sizes, tenants, round_)
                figures["helper"] = helper
            finally:
                stack.stop_process(process)
            figures["deleted"] = delete_written(figures.pop("ids"))
            figures["utc"] = started
            figures["loadavg"] = load_before
            rounds[spec].append(figures)
            print(
                f"round {round_} {started} {label(spec)} load {' '.join(load_before)}:"
                f" EN p50 {figures['write_en']['p50']} p95 {figures['write_en']['p95']} n {figures['write_en']['n']}"
                f" | JA p50 {figures['write_ja']['p50']} p95 {figures['write_ja']['p95']} n {figures['write_ja']['n']}"
                f" | healthz p50 {figures['healthz']['p50']}"
                f" | bulk EN {figures['bulk_en']['per_s']}/s JA {figures['bulk_ja']['per_s']}/s"
                f" | masked {figures['pii_masked']} codes {figures['codes']} deleted {figures['deleted']}",
                flush=True,
            )
    medians = {}
    for spec, runs in rounds.items():
        entry = {}
        for kind in ("write_en", "write_ja", "healthz"):
            pooled = [v for r in runs for v in r["samples"][kind]]
            entry[kind] = {
                "pooled": summary(pooled),
                "p50_per_round": [r[kind]["p50"] for r in runs],
                "p95_per_round": [r[kind]["p95"] for r in runs],
                "median_round_p50": round(statistics.median(r[kind]["p50"] for r in runs), 2),
                "median_round_p95": round(statistics.median(r[kind]["p95"] for r in runs), 2),
            }
        for lang in LANGS:
            items = sum(r[f"bulk_{lang}"]["items"] for r in runs)
            seconds = sum(r[f"bulk_{lang}"]["seconds"] for r in runs)
            entry[f"bulk_{lang}"] = {
                "items": items,
                "per_s": round(items / seconds, 1) if seconds else None,
                "per_s_per_round": [r[f"bulk_{lang}"]["per_s"] for r in runs],
            }
        medians[spec] = entry
        name = label(spec)
        for kind in ("write_en", "write_ja", "healthz"):
            e = entry[kind]
            print(
                f"{name} {kind}: pooled {e['pooled']} | p50 per round {e['p50_per_round']}"
                f" median {e['median_round_p50']} | p95 median {e['median_round_p95']}"
            )
        for lang in LANGS:
            e = entry[f"bulk_{lang}"]
            print(f"{name} bulk_{lang}: {e['items']} items, {e['per_s']}/s | per round {e['per_s_per_round']}")
    first, *others = args.variants
    for spec in others:
        for kind in ("write_en", "write_ja", "healthz"):
            a, b = medians[first][kind]["pooled"]["p50"], medians[spec][kind]["pooled"]["p50"]
            print(f"{kind} p50 {label(spec)} / {label(first)}: {b / a:.3f} ({b - a:+.2f} ms)")
        for lang in LANGS:
            a, b = medians[first][f"bulk_{lang}"]["per_s"], medians[spec][f"bulk_{lang}"]["per_s"]
            print(f"bulk_{lang} rate {label(spec)} / {label(first)}: {b / a:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rounds": rounds, "summary": medians}, indent=1))


if __name__ == "__main__":
    main()
