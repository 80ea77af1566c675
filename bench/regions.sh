#!/usr/bin/env bash
# A region's client latency with and without a WAN between the region and its global tier
# (issue 56's target: unchanged by the WAN), in one run, on loopback.
#
# One global-tier node, one region node with [region] pointing at the global tier through
# bench/delay_proxy.py, which holds every chunk DELAY_MS in each direction (this kernel has no
# `sch_netem`): the region's joins and refills cross the "WAN", the client's requests to the
# region do not. `leaf bench` measures single segment IDs and single snowflake IDs at the
# region, first without the delay (the baseline), then with DELAY_MS each way. During each run
# the script samples the region leader's shortest runway (`leaf_region_runway_seconds`) and
# counts its block grants: how far ahead of running out each refill completed.
#
#   bench/regions.sh [LEAF]        (LEAF defaults to target/release/leaf)
#   DELAY_MS=75 SECS=10 CONNS=32 MIN_BLOCK=200000 BLOCK_SECS=30 bench/regions.sh
#
# The small block_secs makes blocks run out during a 10-second run, so refills happen under
# load and their lead over exhaustion is measured.
set -euo pipefail
cd "$(dirname "$0")/.."

LEAF=${1:-target/release/leaf}
DELAY_MS=${DELAY_MS:-75}
SECS=${SECS:-10}
CONNS=${CONNS:-32}
MIN_BLOCK=${MIN_BLOCK:-200000}
BLOCK_SECS=${BLOCK_SECS:-30}
TOKEN=bench-admin-token-0123456789
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
GPORT=$(free_port) RPORT=$(free_port) PPORT=$(free_port)
GURL="http://127.0.0.1:$GPORT" RURL="http://127.0.0.1:$RPORT" WAN="http://127.0.0.1:$PPORT"
WORK=$(mktemp -d) PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
: >"$WORK/delay_ms"
python3 bench/delay_proxy.py 127.0.0.1 "$PPORT" 127.0.0.1 "$GPORT" "$WORK/delay_ms" &
PIDS+=($!)

wait_health() { # URL
    for _ in $(seq 1 400); do curl -fs -o /dev/null --max-time 1 "$1/health?mode=segment" && return 0; sleep 0.05; done
    echo "$1 did not become healthy" >&2
    exit 1
}

LEAF_ADMIN_TOKEN=$TOKEN "$LEAF" serve --data-dir "$WORK/global" --http-addr "127.0.0.1:$GPORT" \
    >>"$WORK/global.log" 2>&1 &
PIDS+=($!)
wait_health "$GURL"
"$LEAF" token create regions --rights regions,tags --tags '*' --url "$GURL" --token "$TOKEN" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["bearer"])' >"$WORK/global.token"
cat >"$WORK/region.toml" <<EOF
admin_token = "$TOKEN"
[region]
name = "bench"
global = ["$WAN"]
global_token_file = "$WORK/global.token"
min_block = $MIN_BLOCK
block_secs = $BLOCK_SECS
check_ms = 200
EOF
"$LEAF" serve --config "$WORK/region.toml" --data-dir "$WORK/region" --http-addr "127.0.0.1:$RPORT" \
    >>"$WORK/region.log" 2>&1 &
PIDS+=($!)
wait_health "$RURL"
"$LEAF" tag create bench --step 1000 --url "$RURL" --token "$TOKEN" >/dev/null
for _ in $(seq 1 400); do
    curl -fs --max-time 1 "$RURL/api/segment/get/bench" >/dev/null && break
    sleep 0.05
done
for _ in $(seq 1 400); do
    curl -fs --max-time 1 "$RURL/api/snowflake/get/bench" >/dev/null && break
    sleep 0.05
done

metric() { # NAME_PREFIX: the smallest value of the series whose line starts with it, or "-"
    curl -fs -H "Authorization: Bearer $TOKEN" "$RURL/metrics" | python3 -c "
import sys
vals = [float(l.rsplit(' ', 1)[1]) for l in sys.stdin if l.startswith('$1')]
print(min(vals) if vals else '-')"
}

# Samples the shortest runway every 200 ms into FILE until the bench ends.
sample_runway() { # FILE
    while :; do metric 'leaf_region_runway_seconds{' >>"$1"; sleep 0.2; done
}

run() { # LABEL PATH: one bench, printing p50 and p99 (ms) and what the refills did
    local label=$1 path=$2 sampler granted_before granted_after
    granted_before=$(metric 'leaf_region_block_grants_total{outcome="granted"}')
    : >"$WORK/runway"
    sample_runway "$WORK/runway" &
    sampler=$!
    "$LEAF" bench --url "$RURL" --path "$path" -c "$CONNS" -d "${SECS}s" --warmup 1s --json >"$WORK/out.json"
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    granted_after=$(metric 'leaf_region_block_grants_total{outcome="granted"}')
    python3 - "$label" "$WORK/out.json" "$WORK/runway" "$granted_before" "$granted_after" <<'PY'
import json, sys
label, out, runway, before, after = sys.argv[1:]
r = json.load(open(out))
lat = r["latency_us"]
ms = lambda us: us / 1e3
vals = sorted(float(v) for v in open(runway).read().split() if v != "-")
low = f"{vals[0]:.1f} s (median {vals[len(vals) // 2]:.1f} s, {len(vals)} samples)" if vals else "-"
grants = int(float(after)) - int(float(before)) if after != "-" and before != "-" else "-"
print(f"| {label} | {r['requests']} | {r['errors'] + r['failures']} | {ms(lat['p50']):.3f} | {ms(lat['p99']):.3f} | {grants} | {low} |")
PY
}

echo "| run | requests | errors | p50 ms | p99 ms | blocks granted | shortest runway seen |"
echo "|---|---|---|---|---|---|---|"
run "segment, no delay" /api/segment/get/bench
run "snowflake, no delay" /api/snowflake/get/bench
# The WAN: DELAY_MS each way between the region and the global tier.
echo "$DELAY_MS" >"$WORK/delay_ms"
rtt=$(curl -fs -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $TOKEN" "$WAN/health?mode=segment")
echo "(the WAN: ${DELAY_MS} ms each way; a health request through it took ${rtt} s)"
run "segment, ${DELAY_MS} ms each way" /api/segment/get/bench
run "snowflake, ${DELAY_MS} ms each way" /api/snowflake/get/bench
