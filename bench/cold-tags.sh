#!/usr/bin/env bash
# First IDs of cold tags through a 3-node TLS cluster, for one or more builds in the same run.
#
#   bench/cold-tags.sh TAGS CONNECTIONS SECONDS ROUNDS LEAF_BIN [LEAF_BIN...]
#
# For each round and each binary, in turn: a fresh 3-node TLS cluster on 127.0.0.1 (ports
# $LEAF_BENCH_BASE_PORT+1..3, default 18741..18743), TAGS tags created through node 1
# (`leaf tag create-batch`), then `leaf bench` for SECONDS over CONNECTIONS kept-alive
# connections spread over the three nodes, each request for a tag drawn uniformly from the TAGS
# (`--zipf-s 0`), so nearly every request is a tag's first on its node: a tag load and a segment
# allocation through the leader. Prints one Markdown row per run (requests/s, errors, latency
# percentiles), then each binary's mean requests/s as a ratio to the first binary's. The nodes
# and the load generator share the machine.
set -euo pipefail
[[ $# -ge 5 ]] || { sed -n '2,13p' "$0"; exit 2; }
TAGS=$1 CONNS=$2 SECS=$3 ROUNDS=$4
shift 4
for n in "$TAGS" "$CONNS" "$SECS" "$ROUNDS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "TAGS, CONNECTIONS, SECONDS and ROUNDS are positive numbers" >&2; exit 2; }
done
BINS=()
for b in "$@"; do
    [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }
    BINS+=("$(realpath "$b")")
done
BASE=${LEAF_BENCH_BASE_PORT:-18740}
WORK=$(mktemp -d)
declare -A PIDS
stop() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=()
}
trap 'stop; rm -rf "$WORK"' EXIT
url() { echo "https://127.0.0.1:$((BASE + $1))"; }
export LEAF_CA="$WORK/tls/ca.pem"
export LEAF_ADMIN_TOKEN
LEAF_ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
PEERS="1=127.0.0.1:$((BASE + 1)),2=127.0.0.1:$((BASE + 2)),3=127.0.0.1:$((BASE + 3))"
"${BINS[0]}" certs bundle --dir "$WORK/tls" --node 1=127.0.0.1,localhost --node 2=127.0.0.1,localhost \
    --node 3=127.0.0.1,localhost >/dev/null
# Tag names as `{zipf}` writes its ranks: zero-padded to the width of TAGS - 1.
python3 - "$TAGS" >"$WORK/tags.jsonl" <<'PY'
import json, sys
n = int(sys.argv[1])
width = len(str(max(n - 1, 1)))
for i in range(n):
    print(json.dumps({"tag": f"t-{i:0{width}d}", "step": 1000}))
PY

run() { # run BIN: one fresh cluster, the load; prints "req/s errors p50 p99 p99.9" (ms)
    local bin=$1 i
    rm -rf "$WORK"/node*
    for i in 1 2 3; do
        LEAF_CLUSTER_SECRET="$SECRET" RUST_LOG=warn "$bin" serve --node-id "$i" \
            --http-addr "127.0.0.1:$((BASE + i))" --data-dir "$WORK/node$i" --peers "$PEERS" \
            --tls-cert "$WORK/tls/node-$i.pem" --tls-key "$WORK/tls/node-$i-key.pem" \
            --tls-ca "$WORK/tls/ca.pem" >>"$WORK/node$i.log" 2>&1 &
        PIDS[$i]=$!
    done
    for i in 1 2 3; do
        local deadline=$((SECONDS + 60))
        until "$bin" health --quiet --url "$(url "$i")" >/dev/null 2>&1; do
            (( SECONDS < deadline )) || { echo "node $i not ready; see $WORK/node$i.log" >&2; exit 1; }
            sleep 0.1
        done
    done
    "$bin" tag create-batch "$WORK/tags.jsonl" --url "$(url 1)" >/dev/null
    "$bin" bench --url "$(url 1),$(url 2),$(url 3)" --path "/api/segment/get/t-{zipf}" \
        --zipf-tags "$TAGS" --zipf-s 0 -c "$CONNS" -d "${SECS}s" --warmup 1s --json >"$WORK/bench.json"
    stop
    python3 - "$WORK/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_us"]
print(round(r["requests_per_sec"]), r["errors"] + r["failures"], *(f"{l[k] / 1000:.2f}" for k in ("p50", "p99", "p99_9")))
PY
}

echo "| round | build | req/s | errors | p50 ms | p99 ms | p99.9 ms |"
echo "|---:|---|---:|---:|---:|---:|---:|"
declare -A SUM
for r in $(seq "$ROUNDS"); do
    for b in "${BINS[@]}"; do
        read -r RPS ERR P50 P99 P999 < <(run "$b")
        echo "| $r | $b | $RPS | $ERR | $P50 | $P99 | $P999 |"
        SUM[$b]=$(( ${SUM[$b]:-0} + RPS ))
    done
done
echo
echo "| build | mean req/s | vs the first |"
echo "|---|---:|---:|"
for b in "${BINS[@]}"; do
    python3 -c "import sys; m = $((SUM[$b])) / $ROUNDS; print(f'| $b | {m:,.0f} | {m / ($((SUM[${BINS[0]}])) / $ROUNDS):.2f} |')"
done
