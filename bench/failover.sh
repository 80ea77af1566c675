#!/usr/bin/env bash
# Failover windows (issues 34 and 55): how long each request kind goes unserved at the nodes that
# stay up when a node of a TLS cluster fails, the errors clients see, the elections it costs, and
# the segment IDs wasted, with `leaf-failover-bench` (cluster-tests/src/bin/leaf-failover-bench.rs).
#
#   bench/failover.sh [--no-build] [--scenario NAME]... [--logs DIR] [-- BENCH-ARGS...]
#
# Scenarios (default: all seven, one fresh cluster each): leader-kill, leader-term (SIGTERM and
# start again), follower-heal (a follower's Raft links cut, then healed) (10 repetitions each),
# follower-kill, leader-pause (SIGSTOP), leader-heal, rolling-restart (3 each).
# A 5-node cluster: -- --nodes 5.
# Builds the release `leaf` and the bench first unless --no-build (with lcargo when it is on the
# PATH). BENCH-ARGS go to every run (e.g. --reps 5 --seed 7). Prints each run's Markdown tables;
# the per-fault details and the error messages go to stderr. --logs DIR keeps the nodes' logs
# under DIR/<scenario>/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=1 SCENARIOS=() LOGS="" EXTRA=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --no-build) BUILD=0; shift ;;
        --scenario) SCENARIOS+=("$2"); shift 2 ;;
        --logs) LOGS="$2"; shift 2 ;;
        --) shift; EXTRA=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "bench/failover.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ ${#SCENARIOS[@]} -gt 0 ]] || SCENARIOS=(leader-kill leader-term follower-heal follower-kill leader-pause leader-heal rolling-restart)
if [[ $BUILD == 1 ]]; then
    build=(cargo)
    command -v lcargo >/dev/null && build=(lcargo)
    (cd "$ROOT" && "${build[@]}" build --release --quiet -p leaf-node --bin leaf \
        -p leaf-cluster-tests --bin leaf-failover-bench)
fi
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
[[ -x "$TARGET/leaf" && -x "$TARGET/leaf-failover-bench" ]] || {
    echo "bench/failover.sh: $TARGET/leaf or leaf-failover-bench missing (build, or drop --no-build)" >&2
    exit 1
}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) vCPUs, Linux $(uname -r | cut -d- -f1)"
for s in "${SCENARIOS[@]}"; do
    logs=()
    [[ -n "$LOGS" ]] && logs=(--logs "$LOGS/$s")
    echo "bench/failover.sh: $s" >&2
    "$TARGET/leaf-failover-bench" --bin "$TARGET/leaf" --scenario "$s" ${logs[@]+"${logs[@]}"} \
        ${EXTRA[@]+"${EXTRA[@]}"}
done
