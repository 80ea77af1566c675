#!/usr/bin/env bash
# Per-profile throughput (issue 19), as ratios to `segment` in the same run, on this machine:
#   bench/profiles.sh LEAF [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 (a fresh data dir per
# round) with one tag per profile (step 1000 each; daily with 8 digits). Each round measures,
# with wrk (2 threads, 16 keep-alive connections, SECONDS each, default 10), every profile
# twice: single IDs (`GET /api/segment/get/TAG`) and batches of 100 (`?count=100`).
# Prints every run, the medians and each median as a ratio of segment's.
# One node is its own quorum: a monotonic request's leadership round costs no network here,
# so on a 3-node cluster it costs more (one heartbeat round trip per batch of requests).
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,10p' "$0"; exit 2; }
LEAF=$1 SECS=${2:-10} ROUNDS=${3:-3}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
PORT=18583
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
URL="http://127.0.0.1:$PORT"
PROFILES=(segment monotonic obfuscated daily)

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # URL -> requests/s
    wrk -t2 -c16 -d"${SECS}s" "$1" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && { echo "non-2xx answers:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
    awk '/^Requests\/sec:/ { printf "%.1f\n", $2 }' "$WORK/wrk.txt"
}
start() {
    rm -rf "$WORK/data"
    "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
    PID=$!
    wait_up "$URL/health?mode=segment"
    for p in "${PROFILES[@]}"; do
        curl -fs -o /dev/null -X POST "$URL/admin/tags" -H 'content-type: application/json' \
            -d "{\"tag\":\"bench-$p\",\"step\":1000,\"profile\":\"$p\"}"
        wrk -t1 -c4 -d1s "$URL/api/segment/get/bench-$p" >/dev/null # warm-up
    done
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }

declare -A RUNS
echo "| round | profile | single req/s | batch-100 req/s | batch-100 IDs/s |"
echo "|---:|---|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    start
    for p in "${PROFILES[@]}"; do
        s=$(rate "$URL/api/segment/get/bench-$p")
        b=$(rate "$URL/api/segment/get/bench-$p?count=100")
        RUNS[$p.single]+="$s " RUNS[$p.batch]+="$b "
        echo "| $r | $p | $s | $b | $(python3 -c "print(int($b * 100))") |"
    done
    stop
done
echo
echo "| profile | single req/s (median) | ratio to segment | batch-100 IDs/s (median) | ratio to segment |"
echo "|---|---:|---:|---:|---:|"
S0=$(median ${RUNS[segment.single]}) B0=$(median ${RUNS[segment.batch]})
for p in "${PROFILES[@]}"; do
    s=$(median ${RUNS[$p.single]}) b=$(median ${RUNS[$p.batch]})
    echo "| $p | $s | $(ratio "$s" "$S0") | $(python3 -c "print(int($b * 100))") | $(ratio "$b" "$B0") |"
done
