#!/usr/bin/env bash
# What one segment refill costs a node, in counts that do not drift with a shared CPU:
# context switches, syscalls, futex calls and log writes (pwrite64) per refill, plus CPU time.
#
#   bench/refill-cost.sh [--seconds N] [--rate R]
#
# Starts two single nodes from target/release/leaf (build it first: cargo build --release),
# one with a tag of step 100 pinned by max_step (a refill every 10 ms at the default 10,000
# req/s) and one with step 1,000,000 (no refills), drives both with the same open-loop load and
# counts with `perf stat` (linux-perf; needs root or perf_event_paranoid <= 0). The per-refill
# figures are (small - large) / refills. Two rounds; prints one line per node and round.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_=10 RATE=10000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) SECONDS_="$2"; shift 2 ;;
        --rate) RATE="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "bench/refill-cost.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$SECONDS_" =~ ^[1-9][0-9]*$ ]] || { echo "bench/refill-cost.sh: --seconds must be a positive number" >&2; exit 2; }
[[ "$RATE" =~ ^[1-9][0-9]*$ ]] || { echo "bench/refill-cost.sh: --rate must be a positive number" >&2; exit 2; }
die() { echo "bench/refill-cost.sh: $*" >&2; exit 1; }
LEAF="${CARGO_TARGET_DIR:-$ROOT/target}/release/leaf"
[[ -x "$LEAF" ]] || die "$LEAF is missing (cargo build --release --bin leaf)"
for tool in perf curl python3; do command -v "$tool" >/dev/null || die "$tool is missing (install it and rerun)"; done
EVENTS='context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_pwrite64,task-clock'
perf stat -e "$EVENTS" true >/dev/null 2>&1 || die "perf stat cannot count $EVENTS here (root, or perf_event_paranoid <= 0)"

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
    for p in ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null || true; done
    for p in ${PIDS[@]+"${PIDS[@]}"}; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
TOKEN="refill-cost-admin-token-0123" SECRET="refill-cost-cluster-secret-0123"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
refills() { curl -s "$1/metrics" | awk '/^leaf_segment_refills_total/ { print $2; f=1 } END { if (!f) print 0 }'; }

declare -A URL PID
for step in 100 1000000; do
    port="$(free_port)"
    env LEAF_ADMIN_TOKEN="$TOKEN" LEAF_CLUSTER_SECRET="$SECRET" LEAF_BOOTSTRAP_TAGS='[]' RUST_LOG=warn \
        LEAF_SEGMENT__MAX_STEP="$step" "$LEAF" serve --node-id 1 --http-addr "127.0.0.1:$port" \
        --data-dir "$WORK/step-$step" >/dev/null 2>>"$WORK/node.log" &
    PIDS+=($!) PID[$step]=$! URL[$step]="http://127.0.0.1:$port"
    for _ in $(seq 1 300); do curl -sf -o /dev/null "${URL[$step]}/health" && break; sleep 0.05; done
    curl -sf -o /dev/null -X POST -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
        -d "{\"tag\":\"t\",\"step\":$step}" "${URL[$step]}/admin/tags" || die "creating the tag failed"
    "$LEAF" bench --url "${URL[$step]}" --path /api/segment/get/t -c 16 --rate "$RATE" -d 2s --warmup 0s >/dev/null \
        || die "warming step $step failed"
done
for round in 1 2; do
    for step in 100 1000000; do
        r0="$(refills "${URL[$step]}")"
        perf stat -x, -e "$EVENTS" -p "${PID[$step]}" -o "$WORK/stat.csv" -- sleep "$SECONDS_" &
        stat=$!
        "$LEAF" bench --url "${URL[$step]}" --path /api/segment/get/t -c 16 --rate "$RATE" -d "${SECONDS_}s" \
            --warmup 0s >/dev/null || die "leaf bench failed"
        wait "$stat" || die "perf stat failed"
        r1="$(refills "${URL[$step]}")"
        printf 'round %s step %-7s refills %5d  %s\n' "$round" "$step" $((r1 - r0)) \
            "$(grep -v '^#' "$WORK/stat.csv" | grep . | awk -F, '{ sub(/^.*:/, "", $3); printf "%s=%.0f ", $3, $1 }')"
    done
done
