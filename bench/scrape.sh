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
WORK=$(mktemp -d) URL="http://127.0.0.1:$PORT" PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
LEAF_SEGMENT__IDLE_UNLOAD_SECS=20 "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >>"$WORK/node.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$URL/health?mode=segment" && break; sleep 0.05; done
# Names padded to the width of the last one, as `leaf bench` writes `{zipf}` ranks.
WIDTH=${#TAGS}
(( TAGS > 1 )) && WIDTH=$(( ${#TAGS} - ( $(( TAGS - 1 )) < 10 ** (${#TAGS} - 1) ? 1 : 0 ) ))
python3 -c "
import json
for i in range($TAGS): print(json.dumps({'tag': f't-{i:0${WIDTH}d}', 'step': 1000}))" >"$WORK/tags.jsonl"
"$LEAF" tag create-batch "$WORK/tags.jsonl" --url "$URL" >/dev/null
"$LEAF" bench --url "$URL" --path "/api/segment/get/t-{zipf}" --zipf-tags "$TAGS" --zipf-s 1.1 -c 32 -d 10s \
    --warmup 1s --json >/dev/null
loaded() { curl -fs "$URL/cache" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'; }
for _ in $(seq 1 120); do [[ $(loaded) -le 1 ]] && break; sleep 1; done
for _ in $(seq 1 60); do curl -s -o /dev/null -w '%{time_total}\n' "$URL/metrics"; done | sort -n |
    awk '{ a[NR] = $1 * 1000 } END { printf "scrapes %d: p50 %.2f ms, p90 %.2f ms, max %.2f ms\n", NR, a[int(NR * 0.5)], a[int(NR * 0.9)], a[NR] }'
