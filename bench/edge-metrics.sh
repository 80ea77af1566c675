#!/usr/bin/env bash
# What the per-request metrics of issue 21 (route classification, two clock reads and a lock-free
# histogram add per HTTP answer) cost on the ID path, as the ratio of two builds measured in the
# same run, alternating, on this machine:
#   bench/edge-metrics.sh BEFORE AFTER [SECONDS] [ROUNDS]
# BEFORE and AFTER are `leaf` release binaries (without and with the change). Each round starts
# one plaintext node of each in turn on 127.0.0.1 (a fresh data dir, tag bench-orders, step
# 1000) and measures single IDs (`GET /api/segment/get/bench-orders`) with wrk: 2 threads, 16
# keep-alive connections, SECONDS each (default 10). Prints every run, the medians and AFTER/BEFORE.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,10p' "$0"; exit 2; }
BEFORE=$1 AFTER=$2 SECS=${3:-10} ROUNDS=${4:-3}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
for b in "$BEFORE" "$AFTER"; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
PORT=18585
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
URL="http://127.0.0.1:$PORT"
PATH_ID="/api/segment/get/bench-orders"

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
measure() { # BINARY -> requests/s
    rm -rf "$WORK/data"
    "$1" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
    PID=$!
    wait_up "$URL/health?mode=segment"
    curl -fs -o /dev/null -X POST "$URL/admin/tags" -H 'content-type: application/json' -d '{"tag":"bench-orders","step":1000}'
    wrk -t1 -c4 -d1s "$URL$PATH_ID" >/dev/null # warm-up
    wrk -t2 -c16 -d"${SECS}s" "$URL$PATH_ID" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && { echo "non-2xx answers:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    awk '/^Requests\/sec:/ { printf "%.1f\n", $2 }' "$WORK/wrk.txt"
}
B=() A=()
echo "| round | before req/s | after req/s |"
echo "|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    b=$(measure "$BEFORE"); a=$(measure "$AFTER")
    B+=("$b"); A+=("$a")
    echo "| $r | $b | $a |"
done
mb=$(median "${B[@]}") ma=$(median "${A[@]}")
echo
echo "median before $mb, after $ma, after/before $(python3 -c "print(f'{$ma/$mb:.3f}')")"
