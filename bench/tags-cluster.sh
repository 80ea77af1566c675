#!/usr/bin/env bash
# Many tags on a 3-node TLS cluster (issue 31), on this machine:
#   bench/tags-cluster.sh LEAF [TAGS] [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. Three nodes on 127.0.0.1 with TLS (a CA and certificates from
# `leaf certs bundle`), an admin token, raft.snapshot_every from $SNAPSHOT_EVERY (default 100) and
# raft.keep_logs_after_snapshot from $KEEP_LOGS (default 10), so the log behind a snapshot is
# purged and a new node must take the snapshot; $IN_FLIGHT, when set, is `leaf tag create-batch
# --in-flight`. It measures:
# 1. hot-tag single IDs with 10 tags: `leaf bench` (32 connections, SECONDS, default 10) on
#    node 1, one tag, after a warm-up: the baseline;
# 2. creation: TAGS tags (default 999,990) with `leaf tag create-batch` through node 1 (10,000 a
#    request), timed; every node's RSS after;
# 3. hot-tag single IDs again, the same tag and load, right after the creation and once the
#    nodes are quiet (under 10% of a core over a second): the ratios to the baseline; then the
#    same-run comparison: a second 3-node cluster with 10 tags, and ROUNDS (default 3)
#    alternating rounds on the two clusters' node 1, each round's ratio and the mean;
# 4. cold tags' first ID on node 2: 300 tags never asked before, over one kept-alive connection,
#    p50/p99/max, and the same for a tag node 2 already serves; then 10,000 tags made hot on
#    every node (an ID from each) and every node's RSS;
# 5. a new node: node 4 starts empty and is added as a learner through node 1; seconds from the
#    add to its `/health` ready, and to its applied index reaching the log index the cluster
#    had at the add, and how many snapshots it installed (its log);
# 6. a `kill -9` of node 2 and its restart: seconds to `/health` ready;
# 7. every node's RSS at the end.
# Prints a Markdown table per part; the nodes' logs are kept on failure (the path is printed).
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,25p' "$0"; exit 2; }
LEAF=$1 TAGS=${2:-999990} SECS=${3:-10} ROUNDS=${4:-3}
for n in "$TAGS" "$SECS" "$ROUNDS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "TAGS, SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
done
(( TAGS <= 999980 )) || { echo "TAGS: at most 999980 (the cluster holds 1,000,000 tags)" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
LEAF=$(realpath "$LEAF")
BASE=${LEAF_BENCH_BASE_PORT:-18640}
WORK=$(mktemp -d)
declare -A PIDS
ok=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ $ok == 1 ]]; then rm -rf "$WORK"; else echo "logs kept in $WORK" >&2; fi
}
trap cleanup EXIT
export LEAF_CA="$WORK/tls/ca.pem"
export LEAF_ADMIN_TOKEN
LEAF_ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
url() { # url NODE: node 1-4 of cluster a, or b1-b3 of cluster b (part 3b)
    if [[ $1 == b* ]]; then echo "https://127.0.0.1:$((BASE + 20 + ${1#b}))"; else echo "https://127.0.0.1:$((BASE + $1))"; fi
}
PEERS="1=127.0.0.1:$((BASE + 1)),2=127.0.0.1:$((BASE + 2)),3=127.0.0.1:$((BASE + 3))"
PEERS_B="1=127.0.0.1:$((BASE + 21)),2=127.0.0.1:$((BASE + 22)),3=127.0.0.1:$((BASE + 23))"
"$LEAF" certs bundle --dir "$WORK/tls" --node 1=127.0.0.1,localhost --node 2=127.0.0.1,localhost \
    --node 3=127.0.0.1,localhost --node 4=127.0.0.1,localhost >/dev/null

serve() { # serve NODE: starts node NODE (1-4, or b1-b3) again with its data directory
    local key=$1 i=${1#b} peers=$PEERS addr
    addr=$(url "$key") addr=${addr#https://}
    if [[ $key == b* ]]; then peers=$PEERS_B; fi
    LEAF_CLUSTER_SECRET="$SECRET" LEAF_RAFT__SNAPSHOT_EVERY=${SNAPSHOT_EVERY:-100} \
        LEAF_RAFT__KEEP_LOGS_AFTER_SNAPSHOT=${KEEP_LOGS:-10} RUST_LOG=info,openraft=warn \
        "$LEAF" serve --node-id "$i" --http-addr "$addr" --data-dir "$WORK/node$key" \
        --peers "$peers" --tls-cert "$WORK/tls/node-$i.pem" --tls-key "$WORK/tls/node-$i-key.pem" \
        --tls-ca "$WORK/tls/ca.pem" >>"$WORK/node$key.log" 2>&1 &
    PIDS[$key]=$!
}
ready() { "$LEAF" health --quiet --url "$(url "$1")" >/dev/null 2>&1; }
wait_ready() { # wait_ready ID SECONDS: seconds it took, or fails
    local t0 deadline
    t0=$(date +%s.%N) deadline=$((SECONDS + $2))
    until ready "$1"; do
        kill -0 "${PIDS[$1]}" 2>/dev/null || { echo "node $1 exited; see $WORK/node$1.log" >&2; return 1; }
        (( SECONDS < deadline )) || { echo "node $1 not ready within $2 s" >&2; return 1; }
        sleep 0.05
    done
    python3 -c "import time; print(f'{time.time() - $t0:.2f}')"
}
rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/${PIDS[$1]}/status"; }
bench() { # bench TAG [URL]: req/s and errors of single IDs of TAG on node 1 (or URL)
    "$LEAF" bench --url "${2:-$(url 1)}" --path "/api/segment/get/$1" -c 32 -d "${SECS}s" --warmup 1s --json >"$WORK/bench.json"
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(round(r["requests_per_sec"]), r["errors"] + r["failures"])' "$WORK/bench.json"
}

for i in 1 2 3; do serve "$i"; done
for i in 1 2 3; do wait_ready "$i" 60 >/dev/null; done
LEADER_URL=$(url 1)
WIDTH=${#TAGS}
python3 - "$TAGS" "$WIDTH" >"$WORK/tags.jsonl" <<'PY'
import json, sys
n, width = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    print(json.dumps({"tag": f"t-{i:0{width}d}", "step": 1000}))
PY
python3 -c 'import json; [print(json.dumps({"tag": f"hot-{i}", "step": 1000})) for i in range(10)]' >"$WORK/hot.jsonl"
"$LEAF" tag create-batch "$WORK/hot.jsonl" --url "$LEADER_URL" >/dev/null

# 1. The baseline: a hot tag with 10 tags in the cluster.
"$LEAF" bench --url "$LEADER_URL" --path /api/segment/get/hot-0 -c 8 -d 1s --warmup 0s >/dev/null
read -r BASE_RPS BASE_ERR < <(bench hot-0)

# 2. Creation.
T0=$(date +%s.%N)
"$LEAF" tag create-batch "$WORK/tags.jsonl" ${IN_FLIGHT:+--in-flight "$IN_FLIGHT"} --url "$LEADER_URL" >"$WORK/created.json"
T1=$(date +%s.%N)
read -r CREATED EXISTING < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["created"], d["existing"])' "$WORK/created.json")
# A batch the client sent again after a timeout reports what its first delivery made as existing.
CREATED=$((CREATED + EXISTING))
echo "| tags created through node 1 | of them answered existing (a retried batch) | seconds | tags/s | RSS node 1 | node 2 | node 3 |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
echo "| $CREATED | $EXISTING | $(python3 -c "print(f'{$T1 - $T0:.1f}')") | $(python3 -c "print(f'{$CREATED / ($T1 - $T0):,.0f}')") | $(rss_mb 1) MB | $(rss_mb 2) MB | $(rss_mb 3) MB |"
echo

# 3. The hot tag again: right after the creation (the nodes may still be building the snapshot
# by weight it made due, checkpointing, flushing), then once the three nodes are quiet.
read -r RPS ERR < <(bench hot-0)
quiet() { # quiet SECONDS: waits until the nodes use under 10% of a core together over a second
    python3 - "$1" "${PIDS[1]}" "${PIDS[2]}" "${PIDS[3]}" <<'PY'
import os, sys, time
limit, pids = float(sys.argv[1]), sys.argv[2:]
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    total = 0
    for p in pids:
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        total += int(f[11]) + int(f[12])
    return total / tick
t0 = time.time()
while time.time() - t0 < limit:
    a = cpu(); time.sleep(1); b = cpu()
    if b - a < 0.10:
        print(f"{time.time() - t0:.0f}"); sys.exit(0)
print(f"not within {limit:.0f}"); sys.exit(0)
PY
}
QUIET=$(quiet 300)
read -r RPS_QUIET ERR_QUIET < <(bench hot-0)
echo "| hot tag, single IDs on node 1 | req/s | errors | vs 10 tags |"
echo "|---|---:|---:|---:|"
echo "| 10 tags in the cluster | $BASE_RPS | $BASE_ERR | 1.00 |"
echo "| $((CREATED + 10)) tags, right after the creation | $RPS | $ERR | $(python3 -c "print(f'{$RPS / $BASE_RPS:.2f}')") |"
echo "| $((CREATED + 10)) tags, the nodes quiet (after $QUIET s) | $RPS_QUIET | $ERR_QUIET | $(python3 -c "print(f'{$RPS_QUIET / $BASE_RPS:.2f}')") |"
echo

# 3b. The same run's comparison: the baseline above is minutes older than the measure, and this
# shared machine drifts that much. A second cluster (b) with the 10 hot tags only, and rounds
# that alternate between the two clusters' node 1 (b first in odd rounds), while b is up.
for i in b1 b2 b3; do serve "$i"; done
for i in b1 b2 b3; do wait_ready "$i" 60 >/dev/null; done
URL_B=$(url b1)
"$LEAF" tag create-batch "$WORK/hot.jsonl" --url "$URL_B" >/dev/null
"$LEAF" bench --url "$URL_B" --path /api/segment/get/hot-0 -c 8 -d 1s --warmup 0s >/dev/null
echo "| round | cluster b, 10 tags: req/s | cluster a, $((CREATED + 10)) tags: req/s | errors (b, a) | a / b |"
echo "|---:|---:|---:|---:|---:|"
RATIOS=()
for r in $(seq 1 "$ROUNDS"); do
    if (( r % 2 )); then
        read -r B_RPS B_ERR < <(bench hot-0 "$URL_B"); read -r A_RPS A_ERR < <(bench hot-0)
    else
        read -r A_RPS A_ERR < <(bench hot-0); read -r B_RPS B_ERR < <(bench hot-0 "$URL_B")
    fi
    RATIOS+=("$(python3 -c "print(f'{$A_RPS / $B_RPS:.3f}')")")
    echo "| $r | $B_RPS | $A_RPS | $B_ERR, $A_ERR | $(python3 -c "print(f'{$A_RPS / $B_RPS:.2f}')") |"
done
echo "| mean | | | | $(python3 -c "import sys; r = [float(x) for x in sys.argv[1:]]; print(f'{sum(r) / len(r):.2f}')" "${RATIOS[@]}") |"
echo
for i in b1 b2 b3; do kill "${PIDS[$i]}"; wait "${PIDS[$i]}" 2>/dev/null || true; unset "PIDS[$i]"; done

# 4. Cold tags' first ID on node 2, over one kept-alive TLS connection (a client's pool holds
# its connections; a new connection's handshake is no part of a tag's cost): 300 tags never
# asked before, one request each, then as many requests for a tag node 2 has served, the
# baseline of the same path.
python3 - "$(url 2)" "$LEAF_CA" "$TAGS" "$WIDTH" <<'PY'
import http.client, ssl, sys, time, urllib.parse
url, ca, n, width = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlsplit(url)
conn = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=ca))
def timed(path):
    t0 = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    return r.status, (time.perf_counter() - t0) * 1000
timed("/api/segment/get/hot-1")  # the connection, and hot-1's buffers on node 2
rows = {
    "cold tags (first ID)": [timed(f"/api/segment/get/t-{(n // 3 + i * 7) % n:0{width}d}") for i in range(300)],
    "a served tag (baseline)": [timed("/api/segment/get/hot-1") for _ in range(300)],
}
print("| node 2, one connection | requests | errors | p50 | p99 | max |")
print("|---|---:|---:|---:|---:|---:|")
for name, got in rows.items():
    t = sorted(ms for _, ms in got)
    q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
    errors = sum(1 for code, _ in got if code != 200)
    print(f"| {name} | {len(t)} | {errors} | {q(0.5):.2f} ms | {q(0.99):.2f} ms | {t[-1]:.2f} ms |")
PY
echo

# 4b. 10,000 hot tags on every node: one ID from each of 10,000 tags never asked before, on
# every node (16 kept-alive connections per node), then every node's RSS: the issue's "under
# 1 GiB with a million tags, of which 10,000 hot".
python3 - "$TAGS" "$WIDTH" "$LEAF_CA" "$(url 1)" "$(url 2)" "$(url 3)" <<'PY'
import http.client, ssl, sys, threading, time, urllib.parse
n, width, ca, urls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
hot = [f"t-{(2 * n // 3 + i) % n:0{width}d}" for i in range(min(10_000, n))]
ctx = ssl.create_default_context(cafile=ca)
errors, lock = [0], threading.Lock()
def worker(url, tags):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
    for t in tags:
        conn.request("GET", f"/api/segment/get/{t}")
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            with lock:
                errors[0] += 1
t0 = time.time()
threads = [threading.Thread(target=worker, args=(url, hot[k::16])) for url in urls for k in range(16)]
for t in threads: t.start()
for t in threads: t.join()
print(f"{len(hot)} tags made hot on each of {len(urls)} nodes in {time.time() - t0:.1f} s, {errors[0]} errors")
PY
echo "| with $((CREATED + 10)) tags, 10,000 of them hot on every node | node 1 | node 2 | node 3 |"
echo "|---|---:|---:|---:|"
echo "| RSS | $(rss_mb 1) MB | $(rss_mb 2) MB | $(rss_mb 3) MB |"
echo

# 5. A new node joins from a snapshot: ready (/health), then caught up (its applied index at
# the log index the cluster had when it was added).
applied() { "$LEAF" cluster status --url "$(url "$1")" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("last_applied_index") or 0)'; }
TARGET=$("$LEAF" cluster status --url "$LEADER_URL" | python3 -c 'import json, sys; print(json.load(sys.stdin)["last_log_index"])')
serve 4
sleep 0.5 # its listener; the add below retries nothing
T0=$(date +%s.%N)
"$LEAF" cluster add-learner 4 "127.0.0.1:$((BASE + 4))" --url "$LEADER_URL" >/dev/null
wait_ready 4 300 >/dev/null
READY=$(python3 -c "import time; print(f'{time.time() - $T0:.2f}')")
deadline=$((SECONDS + 300))
until (( $(applied 4) >= TARGET )); do
    (( SECONDS < deadline )) || { echo "node 4 did not reach index $TARGET within 300 s" >&2; exit 1; }
    sleep 0.1
done
CAUGHT=$(python3 -c "import time; print(f'{time.time() - $T0:.2f}')")
INSTALLED=$(grep -c "installed snapshot" "$WORK/node4.log" || true)
SNAP=$( (du -b "$WORK"/node1/*/snapshots/*.snap 2>/dev/null || true) | awk '{ s += $1 } END { printf "%.1f", s / 1048576 }')
echo "| new node 4 (learner) | seconds from add to ready | to applied index $TARGET | snapshots it installed | node 1's snapshot file | RSS |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| $((CREATED + 10)) tags | $READY | $CAUGHT | $INSTALLED | $SNAP MB | $(rss_mb 4) MB |"
echo

# 6. kill -9 of node 2 and its restart.
kill -9 "${PIDS[2]}"
wait "${PIDS[2]}" 2>/dev/null || true
serve 2
RESTART=$(wait_ready 2 120)
echo "| kill -9 of node 2 | seconds from restart to ready |"
echo "|---|---:|"
echo "| $((CREATED + 10)) tags | $RESTART |"
echo

# 7. Memory at the end.
echo "| RSS at the end | node 1 | node 2 | node 3 | node 4 |"
echo "|---|---:|---:|---:|---:|"
echo "| MB | $(rss_mb 1) | $(rss_mb 2) | $(rss_mb 3) | $(rss_mb 4) |"
ok=1
