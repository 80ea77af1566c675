#!/usr/bin/env bash
# Repeated loads and idle sweeps on one node: does memory after the sweep level off?
#   bench/cycles.sh LEAF [CYCLES] [TAGS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 (segment.idle_unload_secs
# 20), TAGS tags (default 39,990) created with `leaf tag create-batch`, then CYCLES times
# (default 3): `leaf bench` over a Zipf rank of the tags (s = 1.1, 32 connections, 10 s), RSS
# and the heap in use (`leaf_heap_in_use_bytes`); then, once the idle sweep has unloaded every
# tag, the same again. Prints a Markdown table.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,8p' "$0"; exit 2; }
LEAF=$1 CYCLES=${2:-3} TAGS=${3:-39990} PORT=18639
for n in "$CYCLES" "$TAGS"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "CYCLES and TAGS are positive numbers" >&2; exit 2; }; done
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
WORK=$(mktemp -d) URL="http://127.0.0.1:$PORT" PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
LEAF_SEGMENT__IDLE_UNLOAD_SECS=20 LEAF_METRICS__HEAP_STATS=true "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >>"$WORK/node.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$URL/health?mode=segment" && break; sleep 0.05; done
# Names padded to the width of the last one, as `leaf bench` writes `{zipf}` ranks.
WIDTH=${#TAGS}
(( TAGS > 1 )) && WIDTH=$(( ${#TAGS} - ( $(( TAGS - 1 )) < 10 ** (${#TAGS} - 1) ? 1 : 0 ) ))
python3 -c "
import json, sys
for i in range($TAGS): print(json.dumps({'tag': f't-{i:0${WIDTH}d}', 'step': 1000}))" >"$WORK/tags.jsonl"
"$LEAF" tag create-batch "$WORK/tags.jsonl" --url "$URL" >/dev/null
rss() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"; }
heap() { curl -fs "$URL/metrics" | awk '$1 == "leaf_heap_in_use_bytes" { printf "%.1f", $2 / 1048576 }'; }
loaded() { curl -fs "$URL/cache" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'; }
echo "| cycle | RSS after the load | heap in use | RSS after the sweep | heap in use |"
echo "|---:|---:|---:|---:|---:|"
for c in $(seq 1 "$CYCLES"); do
    "$LEAF" bench --url "$URL" --path "/api/segment/get/t-{zipf}" --zipf-tags "$TAGS" --zipf-s 1.1 -c 32 -d 10s \
        --warmup 1s --json >/dev/null
    A=$(rss) AH=$(heap)
    for _ in $(seq 1 120); do [[ $(loaded) -le 1 ]] && break; sleep 1; done
    # The sweep trims the allocator right after it unloads; give that a moment.
    sleep 2
    echo "| $c | $A MB | $AH MB | $(rss) MB | $(heap) MB |"
done
