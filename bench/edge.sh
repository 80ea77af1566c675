#!/usr/bin/env bash
# Single-ID QPS of the HTTP edge against the bare hyper ceiling, with wrk, on this machine:
#   bench/edge.sh LEAF CEILING [SECONDS] [ROUNDS] [OLD_LEAF]
# LEAF is a `leaf` release binary, CEILING node/examples/http_ceiling (release), OLD_LEAF
# optionally a second `leaf` (e.g. built at the commit before the axum edge). Each round runs,
# alternating, the ceiling then each binary: wrk, WRK_THREADS threads (env, default 1), 64
# keep-alive connections, SECONDS (default 10) on `GET /api/segment/get/leaf-segment-test` (the
# ceiling answers any path). Prints every run and the median requests/s of each, and each median
# as a ratio of the ceiling's. Needs `wrk` (Debian's package). Every node runs on 127.0.0.1 with
# a fresh data dir.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,10p' "$0"; exit 2; }
LEAF=$1 CEILING=$2 SECS=${3:-10} ROUNDS=${4:-3} OLD=${5:-} THREADS=${WRK_THREADS:-1}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ && "$THREADS" =~ ^[1-9][0-9]*$ ]] ||
    { echo "SECONDS, ROUNDS and WRK_THREADS must be positive numbers" >&2; exit 2; }
for b in "$LEAF" "$CEILING" ${OLD:+"$OLD"}; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
PORT=18580
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # -> requests/s of a wrk run on the path
    wrk -t"$THREADS" -c64 -d"${SECS}s" --latency "http://127.0.0.1:$PORT/api/segment/get/leaf-segment-test" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && { echo "non-2xx answers:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
    awk '/^Requests\/sec:/ { printf "%d\n", $2 }' "$WORK/wrk.txt"
}
run_leaf() { # BIN -> requests/s
    rm -rf "$WORK/data"
    "$1" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
    PID=$!
    wait_up "http://127.0.0.1:$PORT/health?mode=segment"
    wrk -t1 -c8 -d1s "http://127.0.0.1:$PORT/api/segment/get/leaf-segment-test" >/dev/null # warm-up
    rate
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}
run_ceiling() {
    "$CEILING" "127.0.0.1:$PORT" >/dev/null 2>&1 &
    PID=$!
    wait_up "http://127.0.0.1:$PORT/"
    wrk -t1 -c8 -d1s "http://127.0.0.1:$PORT/" >/dev/null
    rate
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

C=() L=() O=()
echo "| round | ceiling req/s | leaf req/s | ratio |${OLD:+ old leaf req/s | ratio |}"
echo "|---:|---:|---:|---:|${OLD:+---:|---:|}"
for r in $(seq 1 "$ROUNDS"); do
    c=$(run_ceiling); C+=("$c")
    l=$(run_leaf "$LEAF"); L+=("$l")
    line="| $r | $c | $l | $(python3 -c "print(f'{$l/$c:.3f}')") |"
    if [[ -n $OLD ]]; then
        o=$(run_leaf "$OLD"); O+=("$o")
        line+=" $o | $(python3 -c "print(f'{$o/$c:.3f}')") |"
    fi
    echo "$line"
done
mc=$(median "${C[@]}") ml=$(median "${L[@]}")
line="| median | $mc | $ml | $(python3 -c "print(f'{$ml/$mc:.3f}')") |"
if [[ -n $OLD ]]; then mo=$(median "${O[@]}"); line+=" $mo | $(python3 -c "print(f'{$mo/$mc:.3f}')") |"; fi
echo "$line"
