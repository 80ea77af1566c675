#!/usr/bin/env bash
# Raft writes per second: a 3-node leaf cluster against a 3-node etcd cluster, on this machine:
#   bench/etcd.sh LEAF [ROUNDS] [SAMPLES] [SECONDS]
# LEAF is a `leaf` release binary with `leaf-bench` next to it (or LEAF_BENCH). Each round runs,
# alternating, for 16 then 64 concurrent writers:
#   leaf: `leaf-bench --plaintext --concurrency N --samples SAMPLES` (default 4000): a fresh
#         3-node cluster; its "N concurrent proposers" row, segment allocations per second
#         proposed at the leader (append, fsync, replicate to a quorum that fsyncs, apply);
#   etcd: a fresh 3-node etcd cluster (Debian's etcd-server, default settings, fsync on,
#         plaintext like leaf here), bench/etcd-put.py: N concurrent `KV/Put`s of 8 bytes to
#         the leader over gRPC for SECONDS (default 5).
# Data dirs are under one temp dir, on the same disk. Prints every run, then the medians and
# etcd's puts/s as a ratio of leaf's allocations/s. Needs etcd, etcdctl and python3 with grpcio.
# With LEAF_OLD set to a second `leaf` binary, each round also runs it (same leaf-bench) right
# after LEAF at each concurrency, and the medians add LEAF ÷ LEAF_OLD (issue 51's same-run
# comparison against the build before a change).
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,14p' "$0"; exit 2; }
LEAF=$1 ROUNDS=${2:-3} SAMPLES=${3:-4000} SECS=${4:-5}
BENCH=${LEAF_BENCH:-$(dirname "$LEAF")/leaf-bench}
HERE=$(cd "$(dirname "$0")" && pwd)
for n in "$ROUNDS" "$SAMPLES" "$SECS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS, SAMPLES and SECONDS must be positive numbers" >&2; exit 2; }
done
for b in "$LEAF" "$BENCH"; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
for c in etcd etcdctl python3; do
    command -v "$c" >/dev/null || { echo "$c is not installed (apt-get install etcd-server etcd-client)" >&2; exit 2; }
done
python3 -c 'import grpc' 2>/dev/null || { echo "python3 has no grpcio (pip install grpcio)" >&2; exit 2; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { [[ ${#PIDS[@]} -gt 0 ]] && kill "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

CLIENT=(127.0.0.1:18591 127.0.0.1:18593 127.0.0.1:18595)
PEERS="e1=http://127.0.0.1:18592,e2=http://127.0.0.1:18594,e3=http://127.0.0.1:18596"

leaf() { # N [BIN] -> allocations/s (leaf-bench stops its cluster itself)
    "$BENCH" --bin "${2:-$LEAF}" --plaintext --concurrency "$1" --samples "$SAMPLES" >"$WORK/leaf.txt" 2>"$WORK/leaf.err" ||
        { cat "$WORK/leaf.err" >&2; exit 1; }
    awk -F'|' -v n="$1 concurrent proposers" 'index($2, n) { gsub(/ /, "", $8); print $8 }' "$WORK/leaf.txt"
}
etcd_run() { # N: puts/s in PUTS (run in this shell, so the cleanup knows the PIDS)
    rm -rf "$WORK"/etcd*
    local i
    for i in 1 2 3; do
        etcd --name "e$i" --data-dir "$WORK/etcd$i" \
            --listen-client-urls "http://${CLIENT[i-1]}" --advertise-client-urls "http://${CLIENT[i-1]}" \
            --listen-peer-urls "http://127.0.0.1:$((18590 + 2 * i))" \
            --initial-advertise-peer-urls "http://127.0.0.1:$((18590 + 2 * i))" \
            --initial-cluster "$PEERS" --initial-cluster-state new --initial-cluster-token leaf-bench \
            >"$WORK/etcd$i.log" 2>&1 &
        PIDS+=($!)
    done
    local leader=
    for _ in $(seq 1 100); do
        leader=$(etcdctl --endpoints="$(IFS=,; echo "${CLIENT[*]}")" endpoint status -w json 2>/dev/null | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
        print(s["Endpoint"])' 2>/dev/null) && [[ -n $leader ]] && break
        sleep 0.1
    done
    [[ -n $leader ]] || { echo "etcd elected no leader" >&2; cat "$WORK/etcd1.log" >&2; exit 1; }
    python3 "$HERE/etcd-put.py" --endpoint "$leader" --concurrency 4 --seconds 1 >/dev/null # warm-up
    local out
    out=$(python3 "$HERE/etcd-put.py" --endpoint "$leader" --concurrency "$1" --seconds "$SECS")
    kill "${PIDS[@]}"; wait "${PIDS[@]}" 2>/dev/null || true; PIDS=()
    [[ ${out#* } == 0 ]] || { echo "etcd: ${out#* } puts failed" >&2; exit 1; }
    PUTS=${out% *}
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

OLD=${LEAF_OLD:-}
[[ -z $OLD || -x $OLD ]] || { echo "LEAF_OLD=$OLD is not an executable" >&2; exit 2; }
L16=() E16=() L64=() E64=() O16=() O64=()
echo "| round | leaf allocs/s, 16 | etcd puts/s, 16 | leaf allocs/s, 64 | etcd puts/s, 64 |${OLD:+ LEAF_OLD, 16 | LEAF_OLD, 64 |}"
echo "|---:|---:|---:|---:|---:|${OLD:+---:|---:|}"
for r in $(seq 1 "$ROUNDS"); do
    l16=$(leaf 16); o16=${OLD:+$(leaf 16 "$OLD")}; etcd_run 16; e16=$PUTS
    l64=$(leaf 64); o64=${OLD:+$(leaf 64 "$OLD")}; etcd_run 64; e64=$PUTS
    L16+=("$l16") E16+=("$e16") L64+=("$l64") E64+=("$e64") O16+=("$o16") O64+=("$o64")
    echo "| $r | $l16 | $e16 | $l64 | $e64 |${OLD:+ $o16 | $o64 |}"
done
echo
echo "| writers (median of $ROUNDS) | leaf allocations/s | etcd puts/s | etcd ÷ leaf |${OLD:+ LEAF_OLD allocations/s | leaf ÷ LEAF_OLD |}"
echo "|---|---:|---:|---:|${OLD:+---:|---:|}"
for n in 16 64; do
    l=L$n[@] e=E$n[@] o=O$n[@]
    ml=$(median "${!l}") me=$(median "${!e}")
    if [[ -n $OLD ]]; then
        mo=$(median "${!o}")
        echo "| $n | $ml | $me | $(ratio "$me" "$ml") | $mo | $(ratio "$ml" "$mo") |"
    else
        echo "| $n | $ml | $me | $(ratio "$me" "$ml") |"
    fi
done
