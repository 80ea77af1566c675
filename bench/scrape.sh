#!/usr/bin/env bash
# What a /metrics scrape costs on a node whose heap a load and a sweep have fragmented:
#   bench/scrape.sh LEAF [TAGS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 (segment.idle_unload_secs
# 20; the caller's LEAF_* variables pass through, e.g. LEAF_METRICS__HEAP_STATS=true), TAGS tags
# (default 39,990) created with `leaf tag create-batch`, 10 s of `leaf bench` over a Zipf rank of
# them (s = 1.1, 32 connections), the idle sweep, then 60 `curl` scrapes of /metrics. Prints
# their p50, p90 and max.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,8p' "$0"; exit 2; }
LEAF=$1 TAGS=${2:-39990} PORT=18645
[[ "$TAGS" =~ ^[1-9][0-9]*$ ]] || { echo "TAGS is a positive number" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
# shellcheck source=bench/one-node.sh
source "$(dirname "$0")/one-node.sh"
start_with_tags
zipf_load
wait_swept
for _ in $(seq 1 60); do curl -s -o /dev/null -w '%{time_total}\n' "$URL/metrics"; done | sort -n |
    awk '{ a[NR] = $1 * 1000 } END { printf "scrapes %d: p50 %.2f ms, p90 %.2f ms, max %.2f ms\n", NR, a[int(NR * 0.5)], a[int(NR * 0.9)], a[NR] }'
