#!/usr/bin/env bash
# gRPC on the same `leaf` binary against a bare tonic server, on this machine:
#   bench/grpc.sh LEAF CEILING [SECONDS] [ROUNDS] [OLD_LEAF]
# LEAF is a `leaf` release binary, CEILING the `grpc_ceiling` example built in release
# (`cargo build --release -p leaf-node --example grpc_ceiling`: target/release/examples/).
# Each round runs, alternating, the ceiling then a fresh leaf node (one-node cluster on
# 127.0.0.1), and measures with `leaf bench grpc` (4 HTTP/2 connections x 16 calls in flight,
# SECONDS each, default 10):
#   single: GetSegmentIds count=1 on both (calls/s; the ceiling answers a constant range);
#   batch:  GetSegmentIds count=1000 and count=100000 on leaf (IDs/s).
# OLD_LEAF optionally a second `leaf` (e.g. the previous build), run after LEAF in each round
# (the load always comes from LEAF's `leaf bench grpc`). Prints every run, then the medians and
# each leaf's single-ID calls/s as a ratio of the ceiling's.
# Needs curl and python3.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0"; exit 2; }
LEAF=$1 CEILING=$2 SECS=${3:-10} ROUNDS=${4:-3} OLD=${5:-}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
[[ -x "$CEILING" ]] || { echo "$CEILING is not an executable" >&2; exit 2; }
[[ -z "$OLD" || -x "$OLD" ]] || { echo "$OLD is not an executable" >&2; exit 2; }
PORT=18591 CPORT=18592
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
wait_port() { for _ in $(seq 1 200); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "not up: port $1" >&2; return 1; }
bench() { # URL COUNT -> "calls/s IDs/s"
    "$LEAF" bench grpc --url "$1" --count "$2" --connections 4 --concurrency 16 --duration "${SECS}s" --warmup 1s --threads 2 --json >"$WORK/run.json"
    python3 - "$WORK/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r["errors"] or r["failures"]:
    sys.exit(f"calls failed: {r['errors']} with another status, {r['failures']} without answer")
print(int(r["requests_per_sec"]), int(r["ids_per_sec"]))
PY
}
ceiling_round() { # -> calls/s
    "$CEILING" "127.0.0.1:$CPORT" 2>"$WORK/ceiling.log" &
    PID=$!
    wait_port "$CPORT"
    local c
    read -r c _ < <(bench "http://127.0.0.1:$CPORT" 1)
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    echo "$c"
}
leaf_round() { # [BIN] -> "single-calls/s ids/s@1000 ids/s@100000"
    rm -rf "$WORK/data"
    "${1:-$LEAF}" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
    PID=$!
    wait_up "http://127.0.0.1:$PORT/health?mode=segment"
    local s b k
    read -r s _ < <(bench "http://127.0.0.1:$PORT" 1)
    read -r _ b < <(bench "http://127.0.0.1:$PORT" 1000)
    read -r _ k < <(bench "http://127.0.0.1:$PORT" 100000)
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    echo "$s $b $k"
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

CS=() LS=() LB=() LK=() OS=()
echo "| round | ceiling single calls/s | leaf single calls/s | leaf count=1000 IDs/s | leaf count=100000 IDs/s |${OLD:+ old leaf single calls/s |}"
echo "|---:|---:|---:|---:|---:|${OLD:+---:|}"
for r in $(seq 1 "$ROUNDS"); do
    cs=$(ceiling_round)
    read -r ls lb lk < <(leaf_round)
    CS+=("$cs") LS+=("$ls") LB+=("$lb") LK+=("$lk")
    line="| $r | $cs | $ls | $lb | $lk |"
    if [[ -n $OLD ]]; then
        read -r os _ < <(leaf_round "$OLD")
        OS+=("$os")
        line+=" $os |"
    fi
    echo "$line"
done
cs=$(median "${CS[@]}") ls=$(median "${LS[@]}") lb=$(median "${LB[@]}") lk=$(median "${LK[@]}")
echo
echo "| measurement (median of $ROUNDS) | value | ÷ ceiling single |"
echo "|---|---:|---:|"
echo "| ceiling, single ID, calls/s | $cs | 1.000 |"
echo "| leaf, single ID, calls/s | $ls | $(ratio "$ls" "$cs") |"
echo "| leaf, count=1000, IDs/s | $lb | |"
echo "| leaf, count=100000, IDs/s | $lk | |"
if [[ -n $OLD ]]; then
    os=$(median "${OS[@]}")
    echo "| old leaf, single ID, calls/s | $os | $(ratio "$os" "$cs") |"
fi
