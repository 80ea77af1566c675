#!/usr/bin/env bash
# Segment batches as ranges (`?format=ranges`) against the text batch, on this machine:
#   bench/ranges.sh LEAF [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 (a fresh data dir per round);
# each round measures with wrk (2 threads, 16 keep-alive connections, SECONDS each, default 10),
# alternating the two forms at the same batch size:
#   text   `GET /api/segment/get/leaf-segment-test?count=N`                (one line per ID)
#   ranges `GET /api/segment/get/leaf-segment-test?count=N&format=ranges`  (JSON ranges)
# for N = 1,000 and 100,000 (the text limit), then ranges alone at N = 1,000,000 (its limit).
# IDs/s = requests/s x N. Prints every run, the medians, each ranges median as a ratio of the
# text one, and the body size of one answer of each kind. Needs `wrk` and curl.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,11p' "$0"; exit 2; }
LEAF=$1 SECS=${2:-10} ROUNDS=${3:-3}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
PORT=18582
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
BASE="http://127.0.0.1:$PORT/api/segment/get/leaf-segment-test"

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # URL -> requests/s
    wrk -t2 -c16 -d"${SECS}s" "$1" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && { echo "non-2xx answers:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
    awk '/^Requests\/sec:/ { printf "%.1f\n", $2 }' "$WORK/wrk.txt"
}
ids() { python3 -c "print(int($1 * $2))"; }
start() {
    rm -rf "$WORK/data"
    # The quota of IDs for requests without a token (auth.anonymous_ids_per_sec) is off: this
    # measures how fast a node hands out ranges, not the quota.
    LEAF_AUTH__ANONYMOUS_IDS_PER_SEC=0 "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
    PID=$!
    wait_up "http://127.0.0.1:$PORT/health?mode=segment"
    wrk -t1 -c4 -d1s "$BASE?count=1000" >/dev/null # warm-up
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }

T1=() R1=() T2=() R2=() R3=()
echo "| round | text 1k IDs/s | ranges 1k IDs/s | text 100k IDs/s | ranges 100k IDs/s | ranges 1M IDs/s |"
echo "|---:|---:|---:|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    start
    t1=$(ids "$(rate "$BASE?count=1000")" 1000)
    r1=$(ids "$(rate "$BASE?count=1000&format=ranges")" 1000)
    t2=$(ids "$(rate "$BASE?count=100000")" 100000)
    r2=$(ids "$(rate "$BASE?count=100000&format=ranges")" 100000)
    r3=$(ids "$(rate "$BASE?count=1000000&format=ranges")" 1000000)
    if [[ $r == 1 ]]; then
        SIZES="text 1k: $(curl -fs "$BASE?count=1000" | wc -c) B, ranges 1k: $(curl -fs "$BASE?count=1000&format=ranges" | wc -c) B, text 100k: $(curl -fs "$BASE?count=100000" | wc -c) B, ranges 100k: $(curl -fs "$BASE?count=100000&format=ranges" | wc -c) B, ranges 1M: $(curl -fs "$BASE?count=1000000&format=ranges" | wc -c) B"
    fi
    stop
    T1+=("$t1") R1+=("$r1") T2+=("$t2") R2+=("$r2") R3+=("$r3")
    echo "| $r | $t1 | $r1 | $t2 | $r2 | $r3 |"
done
echo
echo "| batch (median of $ROUNDS) | text IDs/s | ranges IDs/s | ranges ÷ text |"
echo "|---|---:|---:|---:|"
echo "| 1,000 | $(median "${T1[@]}") | $(median "${R1[@]}") | $(ratio "$(median "${R1[@]}")" "$(median "${T1[@]}")") |"
echo "| 100,000 | $(median "${T2[@]}") | $(median "${R2[@]}") | $(ratio "$(median "${R2[@]}")" "$(median "${T2[@]}")") |"
echo "| 1,000,000 (ranges only) | — | $(median "${R3[@]}") | — |"
echo
echo "Body sizes: $SIZES"
