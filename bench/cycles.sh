#!/usr/bin/env bash
# Repeated loads and idle sweeps on one node: does memory after the sweep level off?
#   bench/cycles.sh LEAF [CYCLES] [TAGS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 (segment.idle_unload_secs
# 20), TAGS tags (default 39,990) created with `leaf tag create-batch`, then CYCLES times
# (default 3): first the node right after the creation and after 25 s idle (an allocator that
# returns memory on a timer has done so by then); then `leaf bench` over a Zipf rank of the
# tags (s = 1.1, 32 connections, 10 s), RSS and the heap in use (`leaf_heap_in_use_bytes`);
# then, once the idle sweep has unloaded every tag, the same again. Prints Markdown tables.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,9p' "$0"; exit 2; }
LEAF=$1 CYCLES=${2:-3} TAGS=${3:-39990} PORT=18639
for n in "$CYCLES" "$TAGS"; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "CYCLES and TAGS are positive numbers" >&2; exit 2; }; done
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
# shellcheck source=bench/one-node.sh
source "$(dirname "$0")/one-node.sh"
LEAF_METRICS__HEAP_STATS=true start_with_tags
rss() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"; }
heap() { curl -fs "$URL/metrics" | awk '$1 == "leaf_heap_in_use_bytes" { printf "%.1f", $2 / 1048576 }'; }
C=$(rss) CH=$(heap)
sleep 25
echo "| after the creation | RSS | heap in use | RSS 25 s later | heap in use |"
echo "|---|---:|---:|---:|---:|"
echo "| $TAGS tags | $C MB | $CH MB | $(rss) MB | $(heap) MB |"
echo
echo "| cycle | RSS after the load | heap in use | RSS after the sweep | heap in use |"
echo "|---:|---:|---:|---:|---:|"
for c in $(seq 1 "$CYCLES"); do
    zipf_load
    A=$(rss) AH=$(heap)
    wait_swept
    # The sweep trims the allocator right after it unloads; give that a moment.
    sleep 2
    echo "| $c | $A MB | $AH MB | $(rss) MB | $(heap) MB |"
done
