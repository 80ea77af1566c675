#!/usr/bin/env python3
"""Turns bench/run.sh's measurements into the Markdown table of BENCHMARKS.md.

Arguments: results.jsonl, leaf-bench's Markdown output, criterion's text output, the machine
description, the command line. Medians over runs; each target row says measured, target, met.
"""
import datetime
import json
import re
import statistics
import sys

results_path, leaf_bench_path, criterion_path, machine, command = sys.argv[1:6]
rows = [json.loads(line) for line in open(results_path) if line.strip()]


def runs(name):
    return [r for r in rows if r.get("name") == name]


def med(name, key):
    values = []
    for r in runs(name):
        v = r
        for k in key.split("."):
            v = v[k]
        values.append(v)
    return statistics.median(values) if values else None


def get(r, key):
    for k in key.split("."):
        r = r[k] if r is not None else None
    return r


def paired(name, base, key):
    """Median over runs of name's key divided by base's key in the same run."""
    ratios = []
    for r in runs(name):
        b = [x for x in runs(base) if x["run"] == r["run"]]
        if b and get(r, key) is not None and get(b[0], key):
            ratios.append(get(r, key) / get(b[0], key))
    return statistics.median(ratios) if ratios else None


def extras(prefix):
    return [r["value"] for r in rows if r["name"].startswith(prefix)]


def errors(name):
    return sum(r["errors"] + r["failures"] for r in runs(name))


def fmt(v, unit=""):
    if v is None:
        return "—"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} M{unit}"
    if abs(v) >= 1e4:
        return f"{v:,.0f}{unit}"
    return f"{v:.3g}{unit}"


def met(ok):
    return "—" if ok is None else ("**met**" if ok else "**missed**")


n_runs = len(runs("ceiling"))
ceil = med("ceiling", "requests_per_sec")
ceil_half_p999 = med("ceiling_half", "latency_us.p99_9")
table = []


def ratio_row(what, name, target, base="ceiling"):
    # The baseline measured next to this row in each run, when the suite took one.
    base = base if runs(base) else "ceiling"
    q = med(name, "requests_per_sec")
    r = paired(name, base, "requests_per_sec")
    cpu = med(name, "server_cpu_us_per_request")
    cpu_r = paired(name, base, "server_cpu_us_per_request")
    cpu_text = f"; server CPU {cpu:.2f} µs/request ({cpu_r:.2f} × the ceiling's)" if cpu and cpu_r else ""
    table.append((what, f"≥ {target} × ceiling", f"{fmt(q, ' req/s')} ({r:.2f} ×){cpu_text}" if r else "—",
                  met(r >= target if r is not None else None)))


ceil_cpu = med("ceiling", "server_cpu_us_per_request")
ceil_cpu_text = f"; server CPU {ceil_cpu:.2f} µs/request" if ceil_cpu else ""
table.append(("HTTP ceiling (baseline), closed loop", "—", fmt(ceil, " req/s") + ceil_cpu_text, "—"))
ratio_row("`/api/segment/get/{tag}`, single node", "segment", 0.9)
ratio_row("`/api/snowflake/get/{key}`, single node", "snowflake", 0.9)
ratio_row("segment, one node of a 3-node cluster", "cluster_segment", 0.85, "ceiling_cluster")
ratio_row("snowflake, one node of a 3-node cluster", "cluster_snowflake", 0.85, "ceiling_cluster")

seg_half = med("segment_half", "latency_us.p99_9")
half_r = paired("segment_half", "ceiling_half", "latency_us.p99_9")
if seg_half is not None and ceil_half_p999 and half_r:
    ok = seg_half <= 1000 and half_r <= 2
    table.append(("p99.9 at half the ceiling's QPS (open loop), segment",
                  "≤ 1 ms and ≤ 2 × ceiling's",
                  f"{seg_half / 1000:.2f} ms; ceiling {ceil_half_p999 / 1000:.2f} ms ({half_r:.2f} ×, per-run median)",
                  met(ok)))
small = med("segment_half_small_step", "latency_us.p99_9")
small_r = paired("segment_half_small_step", "segment_half", "latency_us.p99_9")
if small is not None and seg_half and small_r:
    errs = errors("segment_half_small_step")
    waited = int(sum(extras("waits_small_run")))
    waited_large = int(sum(extras("waits_large_run")))
    ok = small_r <= 1.5 and errs == 0 and waited == 0
    table.append(("small step (refill every ~10 ms) vs large step, p99.9 at half ceiling",
                  "≤ 1.5 ×, zero errors, no request waits for a refill",
                  f"{small / 1000:.2f} ms vs {seg_half / 1000:.2f} ms ({small_r:.2f} ×, per-run median), {errs} errors; "
                  f"requests that waited for a refill: {waited} (small step), {waited_large} (large step)",
                  met(ok)))
b = med("segment_batch_1000", "ids_per_sec")
table.append(("segment batch `count=1000`", "≥ 10 M IDs/s", fmt(b, " IDs/s"), met(b >= 10e6 if b else None)))
b = med("snowflake_batch_100000", "ids_per_sec")
table.append(("snowflake batch `count=100000`, one node", "≥ 3.5 M IDs/s (limit 4.096 M)", fmt(b, " IDs/s"),
              met(b >= 3.5e6 if b else None)))

# criterion: "name  time: [...]" then "thrpt: [lo mid hi]" (names may wrap onto their own line).
crit = {}
name = None
units = {"elem/s": 1, "Kelem/s": 1e3, "Melem/s": 1e6, "Gelem/s": 1e9}
for line in open(criterion_path):
    m = re.match(r"^(\S+/\S+)", line)
    if m:
        name = m.group(1)
    m = re.search(r"thrpt:\s*\[\S+ \S+ (\S+) (\S+) ", line)
    if m and name:
        crit[name] = float(m.group(1)) * units.get(m.group(2), 1)
take = crit.get("segment_take/1_thread")
table.append(("in-process segment take, 1 thread", "≥ 25 M IDs/s", fmt(take, " IDs/s"), met(take >= 25e6 if take else None)))
gen = crit.get("snowflake/real_clock_1_id_per_call")
table.append(("in-process snowflake generate", "≥ 4.0 M IDs/s (98% of 4.096 M)", fmt(gen, " IDs/s"),
              met(gen >= 4.0e6 if gen else None)))

enc, base, dec, app = (crit.get(f"codec/{n}") for n in
                       ("encode_log_entry", "baseline_bincode_encode_log_entry", "decode_log_entry", "apply_allocation"))
if enc and base:
    table.append(("codec: encode a segment-allocation log entry (versioned, CRC)", "report",
                  f"{1e9 / enc:.0f} ns ({base / enc:.2f} × the time of bincode alone)", "—"))
if dec:
    table.append(("codec: decode it", "report", f"{1e9 / dec:.0f} ns", "—"))
if app:
    table.append(("state machine: pure `apply` of the allocation", "report", f"{1e9 / app:.0f} ns", "—"))

idle = extras("rss_idle_kb")
tags = extras("rss_tags_kb")
count = extras("rss_tag_count")
if idle:
    table.append(("RSS, idle node", "≤ 30 MB", f"{idle[0] / 1024:.1f} MB", met(idle[0] / 1024 <= 30)))
if tags:
    table.append((f"RSS with {int(count[0]):,} active tags", "≤ 150 MB", f"{tags[0] / 1024:.1f} MB",
                  met(tags[0] / 1024 <= 150 if count and count[0] >= 10000 else None)))
starts = extras("start_to_healthy_ms")
if starts:
    s = statistics.median(starts)
    table.append(("start → healthy, single node (median of 5)", "≤ 1 s", f"{s:.0f} ms", met(s <= 1000)))
redis = extras("redis_incr_run")
if redis:
    r = statistics.median(redis)
    table.append(("Redis `INCR` (redis-benchmark, same connections)", "reference", f"{fmt(r, ' req/s')} ({r / ceil:.2f} × ceiling)", "—"))
else:
    table.append(("Redis `INCR`", "reference", "not installed", "—"))

today = datetime.date.today().isoformat()
out = [f"### {today} — `bench/run.sh` — {machine}", "",
       f"Command: `{command}`; {n_runs} run(s). Values are medians; ratios are medians of per-run ratios "
       "(each run measures the baseline next to leaf). `leaf bench` (1 generator thread) shares the machine.", "",
       "| what | target | measured | |", "|---|---|---|---|"]
out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in table]
out += ["", "Per run (req/s; p99.9 µs):", ""]
names = []
for r in rows:
    if "requests_per_sec" in r and r["name"] not in names:
        names.append(r["name"])
for nm in names:
    cells = [f"{r['requests_per_sec']:,.0f} / {r['latency_us']['p99_9']:,.0f}" for r in runs(nm)]
    out.append(f"- `{nm}`: " + "; ".join(cells))
out += ["", "Segment allocation through Raft (3 nodes, `leaf-bench --concurrency 64`):", ""]
out += [line.rstrip() for line in open(leaf_bench_path) if line.startswith("|")]
print("\n".join(out))
