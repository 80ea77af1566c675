#!/usr/bin/env bash
# Many tags on one node (issue 31), on this machine:
#   bench/tags.sh LEAF [TAGS] [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 (segment.idle_unload_secs
# 20, raft.snapshot_every from $SNAPSHOT_EVERY, default 10,000). It measures:
# 1. creation: TAGS tags (default 39,990) `t-00000` … `t-39989` with `leaf tag create-batch` from a file
#    of JSON lines (10,000 per request), timed; the node's RSS before and after;
# 2. cold tags' first ID: 300 tags never asked before, one `curl` each (time_total), p50/p99;
# 3. load over the tags, `leaf bench` (1 thread, 32 connections, SECONDS each, default 10),
#    alternating ROUNDS times (default 2): single IDs of one hot tag (the baseline), then of
#    `t-{zipf}` (a Zipf rank over all TAGS, s = 1.1); req/s, errors, and the ratio of the
#    Zipf run to the baseline of its round;
# 4. the tags loaded after the load (`/cache`), RSS and the heap (`leaf_heap_*`); then, once
#    the idle sweep has unloaded them, the same again;
# 5. a `kill -9` and a restart: seconds until `/health` is ready, RSS then, the size of the
#    snapshot file (the live state) and of the whole data directory.
# Prints a Markdown table per part.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,20p' "$0"; exit 2; }
LEAF=$1 TAGS=${2:-39990} SECS=${3:-10} ROUNDS=${4:-2}
for n in "$TAGS" "$SECS" "$ROUNDS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "TAGS, SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
done
(( TAGS <= 999990 )) || { echo "TAGS: at most 999990 (the cluster holds 1,000,000 tags)" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
PORT=18631
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
URL="http://127.0.0.1:$PORT"
# Names padded to the width of the last one, as `leaf bench` writes `{zipf}` ranks.
WIDTH=${#TAGS}
(( TAGS > 1 )) && WIDTH=$(( ${#TAGS} - ( $(( TAGS - 1 )) < 10 ** (${#TAGS} - 1) ? 1 : 0 ) ))
name() { printf "t-%0${WIDTH}d" "$1"; }

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"; }
# The allocator's heap in use and free (`leaf_heap_*` on /metrics), in MB.
heap_mb() { curl -fs "$URL/metrics" | awk -v m="leaf_heap_$1_bytes" '$1 == m { printf "%.1f", $2 / 1048576 }'; }
loaded() { curl -fs "$URL/cache" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

serve() {
    LEAF_SEGMENT__IDLE_UNLOAD_SECS=20 LEAF_METRICS__HEAP_STATS=true LEAF_RAFT__SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-10000} "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" \
        >>"$WORK/node.log" 2>&1 &
    PID=$!
}
serve
wait_up "$URL/health?mode=segment"
RSS0=$(rss_mb)

# 1. Creation.
python3 - "$TAGS" "$WIDTH" >"$WORK/tags.jsonl" <<'PY'
import json, sys
n, width = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    print(json.dumps({"tag": f"t-{i:0{width}d}", "step": 1000}))
PY
T0=$(date +%s.%N)
"$LEAF" tag create-batch "$WORK/tags.jsonl" --url "$URL" >"$WORK/created.json"
T1=$(date +%s.%N)
RSS1=$(rss_mb) USE1=$(heap_mb in_use) FREE1=$(heap_mb free)
python3 - "$T0" "$T1" "$TAGS" "$WORK/created.json" "$RSS0" "$RSS1" <<'PY'
import json, sys
t0, t1, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
done = json.load(open(sys.argv[4]))
rss0, rss1 = float(sys.argv[5]), float(sys.argv[6])
print("| tags created | seconds | tags/s | RSS before | RSS after | per tag (no tag loaded) |")
print("|---:|---:|---:|---:|---:|---:|")
print(f"| {done['created']:,} | {t1 - t0:.2f} | {done['created'] / (t1 - t0):,.0f} | {rss0} MB | {rss1} MB "
      f"| {(rss1 - rss0) * 1048576 / max(done['created'], 1):,.0f} bytes |")
PY
echo

# 2. Cold tags' first ID (tags from the middle of the range, never asked).
for i in $(seq 0 299); do
    curl -s -o /dev/null -w '%{http_code} %{time_total}\n' "$URL/api/segment/get/$(name $(( (TAGS / 3 + i * 7) % TAGS )))"
done >"$WORK/cold.txt"
python3 - "$WORK/cold.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
t = sorted(float(s) * 1000 for _, s in rows)
errors = sum(1 for c, _ in rows if c != "200")
q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
print("| cold tags asked | errors | first ID p50 | p99 | max |")
print("|---:|---:|---:|---:|---:|")
print(f"| {len(t)} | {errors} | {q(0.5):.2f} ms | {q(0.99):.2f} ms | {t[-1]:.2f} ms |")
PY
echo

# 3. Load: one hot tag against a Zipf load over every tag.
HOT=$(name 0)
"$LEAF" bench --url "$URL" --path "/api/segment/get/$HOT" -c 8 -d 1s --warmup 0s >/dev/null # warm-up
declare -A RUNS
echo "| round | load | req/s | errors | vs one hot tag |"
echo "|---:|---|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    for mode in hot zipf; do
        case $mode in
            hot) P="/api/segment/get/$HOT" ;;
            zipf) P="/api/segment/get/t-{zipf}" ;;
        esac
        "$LEAF" bench --url "$URL" --path "$P" --zipf-tags "$TAGS" --zipf-s 1.1 -c 32 -d "${SECS}s" --warmup 1s --json \
            >"$WORK/bench.json"
        read -r RPS ERR < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(round(r["requests_per_sec"]), r["errors"] + r["failures"])' "$WORK/bench.json")
        RUNS[$r.$mode]=$RPS
        if [[ $mode == zipf ]]; then
            RATIO=$(python3 -c "print(f'{$RPS / ${RUNS[$r.hot]}:.2f}')")
            echo "| $r | Zipf over $TAGS tags (s = 1.1) | $RPS | $ERR | $RATIO |"
        else
            echo "| $r | one hot tag | $RPS | $ERR | 1.00 |"
        fi
    done
done
echo

# 4. What stays loaded.
L1=$(loaded) RSS2=$(rss_mb) USE2=$(heap_mb in_use) FREE2=$(heap_mb free)
for _ in $(seq 1 120); do
    [[ $(loaded) -le 1 ]] && break
    sleep 1
done
L2=$(loaded) RSS3=$(rss_mb) USE3=$(heap_mb in_use) FREE3=$(heap_mb free)
echo "| after | tags loaded | RSS | heap in use | heap free |"
echo "|---|---:|---:|---:|---:|"
echo "| the creation (no tag loaded) | 0 | $RSS1 MB | $USE1 MB | $FREE1 MB |"
echo "| the load | $L1 | $RSS2 MB | $USE2 MB | $FREE2 MB |"
echo "| the idle sweep (segment.idle_unload_secs = 20) | $L2 | $RSS3 MB | $USE3 MB | $FREE3 MB |"
echo

# 5. kill -9 and restart.
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
T0=$(date +%s.%N)
serve
for _ in $(seq 1 1200); do
    curl -fs -o /dev/null --max-time 1 "$URL/health?mode=segment" && break
    sleep 0.05
done
T1=$(date +%s.%N)
SNAP=$( (du -b "$WORK"/data/*/snapshots/*.snap 2>/dev/null || true) | awk '{ s += $1 } END { printf "%.1f", s / 1048576 }')
DISK=$(du -sb "$WORK/data" | awk '{ printf "%.1f", $1 / 1048576 }')
echo "| restart after kill -9 | seconds to ready | RSS | snapshot file | data dir on disk |"
echo "|---|---:|---:|---:|---:|"
echo "| $TAGS tags | $(python3 -c "print(f'{$T1 - $T0:.2f}')") | $(rss_mb) MB | $SNAP MB | $DISK MB |"
