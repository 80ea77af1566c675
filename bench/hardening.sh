#!/usr/bin/env bash
# Before/after figures of the hardening issue, on this machine, in one run:
#   bench/hardening.sh OLD_LEAF NEW_LEAF CEILING [SECONDS]
# OLD_LEAF and NEW_LEAF are two `leaf` release binaries (e.g. built at two commits), CEILING is
# node/examples/http_ceiling (release). The load generator is NEW_LEAF's `leaf bench` (its
# --path takes {rand}). For each binary, alternating, twice:
#   - single-ID segment QPS of a known tag (closed loop, 64 connections), and the ceiling's
#     right before it: the ratio is what matters on a noisy shared machine;
#   - random unknown tags (`/api/segment/get/u-{rand}`, every answer a 404): requests/s, on one
#     node, and on a follower of a 3-node cluster (each unknown tag needs the leader's read
#     index there);
# then once per binary: a 15,000-connection flood (bench/conn-flood.py): RSS before, during,
# after. Every node runs on 127.0.0.1 with a fresh data dir; everything is torn down at the end.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,11p' "$0"; exit 2; }
OLD=$1 NEW=$2 CEILING=$3 SECS=${4:-5}
[[ "$SECS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS must be a positive number" >&2; exit 2; }
for b in "$OLD" "$NEW" "$CEILING"; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT=18480 CPORT=18481
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
start_node() { # BIN -> pid in NODE
    rm -rf "$WORK/data"
    "$1" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
    NODE=$!; PIDS+=("$NODE")
    wait_up "http://127.0.0.1:$PORT/health?mode=segment"
}
stop_node() { kill "$NODE"; wait "$NODE" 2>/dev/null || true; }
rate() { # PATH [URL] -> requests/s
    "$NEW" bench --url "${2:-http://127.0.0.1:$PORT}" --path "$1" -c 64 -d "${SECS}s" --warmup 1s --json \
        | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["requests_per_sec"]))'
}
ceiling() {
    "$CEILING" "127.0.0.1:$CPORT" >/dev/null 2>&1 & local c=$!; PIDS+=("$c")
    wait_up "http://127.0.0.1:$CPORT/" || true
    rate / "http://127.0.0.1:$CPORT"
    kill "$c"; wait "$c" 2>/dev/null || true
}

echo "| run | binary | ceiling req/s | known tag req/s | ratio | unknown tags req/s |"
echo "|---|---|---:|---:|---:|---:|"
for run in 1 2; do
    for which in old new; do
        bin=$OLD; [[ $which == new ]] && bin=$NEW
        c=$(ceiling)
        start_node "$bin"
        k=$(rate /api/segment/get/leaf-segment-test)
        u=$(rate "/api/segment/get/u-{rand}")
        stop_node
        echo "| $run | $which | $c | $k | $(python3 -c "print(f'{$k/$c:.2f}')") | $u |"
    done
done
echo
echo "| run | binary | 3-node follower: known tag req/s | unknown tags req/s |"
echo "|---|---|---:|---:|"
SECRET=bench-cluster-secret-0123456789 TOKEN=bench-admin-token-0123456789
PEERS="1=127.0.0.1:18491,2=127.0.0.1:18492,3=127.0.0.1:18493"
for run in 1 2; do
    for which in old new; do
        bin=$OLD; [[ $which == new ]] && bin=$NEW
        CL=()
        for i in 1 2 3; do
            rm -rf "$WORK/c$i"
            LEAF_CLUSTER_SECRET=$SECRET LEAF_ADMIN_TOKEN=$TOKEN "$bin" serve --node-id "$i" --data-dir "$WORK/c$i" \
                --http-addr "127.0.0.1:1849$i" --peers "$PEERS" >"$WORK/c$i.log" 2>&1 &
            CL+=($!); PIDS+=($!)
        done
        for i in 1 2 3; do wait_up "http://127.0.0.1:1849$i/health?mode=segment"; done
        leader=$(curl -fs -H "Authorization: Bearer $TOKEN" http://127.0.0.1:18491/cluster/status | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader_id"])')
        f=1; [[ $leader == 1 ]] && f=2
        k=$(rate /api/segment/get/leaf-segment-test "http://127.0.0.1:1849$f")
        u=$(rate "/api/segment/get/u-{rand}" "http://127.0.0.1:1849$f")
        echo "| $run | $which | $k | $u |"
        for p in "${CL[@]}"; do kill "$p"; done
        for p in "${CL[@]}"; do wait "$p" 2>/dev/null || true; done
    done
done
echo
for which in old new; do
    bin=$OLD; [[ $which == new ]] && bin=$NEW
    start_node "$bin"
    echo "flood, $which: $(python3 "$ROOT/bench/conn-flood.py" --pid "$NODE" --port "$PORT" --connections 15000 | tr '\n' ';')"
    stop_node
done
