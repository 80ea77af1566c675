#!/usr/bin/env bash
# Does a million tags cost the hot path? One node's hot tag with many tags against one with 10:
#   bench/hot-tag-ab.sh LEAF [TAGS] [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. Two plaintext single-node clusters on 127.0.0.1 run side by
# side: A holds TAGS tags (default 999,980, made with `leaf tag create-batch`) and B none, and
# both the 10 tags hot-0 to hot-9. Then ROUNDS (default 6) rounds of `leaf bench` (64
# connections, SECONDS, default 5, after a 1 s warm-up) on hot-0, alternating which node goes
# first, print each round's req/s and the ratio A / B, then the mean ratio and both RSS.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,8p' "$0"; exit 2; }
LEAF=$1 TAGS=${2:-999980} SECS=${3:-5} ROUNDS=${4:-6}
for n in "$TAGS" "$SECS" "$ROUNDS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "TAGS, SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
done
(( TAGS <= 999980 )) || { echo "TAGS: at most 999980 (a cluster holds 1,000,000 tags)" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
BASE=${LEAF_BENCH_BASE_PORT:-18700}
WORK=$(mktemp -d)
declare -A PIDS
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
url() { if [[ $1 == a ]]; then echo "http://127.0.0.1:$((BASE + 1))"; else echo "http://127.0.0.1:$((BASE + 2))"; fi; }
for n in a b; do
    "$LEAF" serve --data-dir "$WORK/$n" --http-addr "$(url $n | cut -d/ -f3)" >"$WORK/$n.log" 2>&1 &
    PIDS[$n]=$!
done
for n in a b; do
    deadline=$((SECONDS + 60))
    until "$LEAF" health --quiet --url "$(url $n)" >/dev/null 2>&1; do
        kill -0 "${PIDS[$n]}" 2>/dev/null && (( SECONDS < deadline )) || { echo "node $n did not start: $WORK/$n.log" >&2; exit 1; }
        sleep 0.05
    done
done
python3 -c 'import json; [print(json.dumps({"tag": f"hot-{i}", "step": 1000})) for i in range(10)]' >"$WORK/hot.jsonl"
python3 - "$TAGS" >"$WORK/tags.jsonl" <<'PY'
import json, sys
n = int(sys.argv[1])
for i in range(n):
    print(json.dumps({"tag": f"t-{i:06d}", "step": 1000}))
PY
for n in a b; do "$LEAF" tag create-batch "$WORK/hot.jsonl" --url "$(url $n)" >/dev/null; done
"$LEAF" tag create-batch "$WORK/tags.jsonl" --url "$(url a)" >/dev/null
rm "$WORK/tags.jsonl"
bench() { # bench NODE: req/s of single IDs of hot-0
    "$LEAF" bench --url "$(url "$1")" --path /api/segment/get/hot-0 -c 64 -d "${SECS}s" --warmup 1s --json |
        python3 -c 'import json, sys; r = json.load(sys.stdin); print(round(r["requests_per_sec"]), r["errors"] + r["failures"])'
}
echo "| round | B, 10 tags: req/s | A, $((TAGS + 10)) tags: req/s | errors (B, A) | A / B |"
echo "|---:|---:|---:|---:|---:|"
RATIOS=()
for r in $(seq 1 "$ROUNDS"); do
    if (( r % 2 )); then
        read -r B B_ERR < <(bench b); read -r A A_ERR < <(bench a)
    else
        read -r A A_ERR < <(bench a); read -r B B_ERR < <(bench b)
    fi
    RATIOS+=("$(python3 -c "print($A / $B)")")
    echo "| $r | $B | $A | $B_ERR, $A_ERR | $(python3 -c "print(f'{$A / $B:.2f}')") |"
done
echo "| mean | | | | $(python3 -c "import sys; r = [float(x) for x in sys.argv[1:]]; print(f'{sum(r) / len(r):.2f}')" "${RATIOS[@]}") |"
rss() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/${PIDS[$1]}/status"; }
echo
echo "RSS: A $(rss a) MB, B $(rss b) MB"
