#!/usr/bin/env bash
# The benchmark suite: every performance target of leaf, measured in one run on this machine,
# as ratios against baselines measured in the same run (the HTTP ceiling, Redis INCR).
#
#   bench/run.sh [--runs N] [--duration Ns] [--tail-duration Ns] [--connections 64] [--no-append] [--quick]
#
# --quick is --runs 1 with 2 s runs (flags after it override). --duration is each closed-loop
# run's length (default 5s); --tail-duration that of the open-loop
# runs at half the ceiling's rate whose p99.9 the tail targets compare (default 20s: at ~40k
# req/s a p99.9 then rests on ~800 samples, where a 5 s run's rests on ~200 and swings 3x).
#
# Builds release binaries, then for each of N runs (default 3; the table shows medians):
#   - the HTTP ceiling (node/examples/http_ceiling.rs), closed loop and open loop at half its QPS;
#   - one node: segment and snowflake IDs, closed loop; segment at half the ceiling's QPS with a
#     large step and with a small step (a refill every ~10 ms); batches (count=1000, 100,000);
#   - one node of a 3-node cluster (loopback): segment and snowflake IDs;
#   - Redis INCR with redis-benchmark and the same connection count, if redis is installed;
# and once: in-process criterion benches, Raft allocation latency (leaf-bench), RSS idle and
# with 10,000 active tags, start -> healthy. Prints a Markdown table and appends it, with the
# machine's description, to BENCHMARKS.md (unless --no-append).
#
# Needs: cargo, curl, python3 (for the table). Redis is optional (apt-get install redis-server;
# as root this script installs it when apt-get is there). The load generator is `leaf bench`,
# sharing the machine with what it measures: every target is a ratio for that reason.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=3 DURATION=5s TAIL=20s CONNS=64 APPEND=1 QUICK=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) RUNS="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --tail-duration) TAIL="$2"; shift 2 ;;
        --connections) CONNS="$2"; shift 2 ;;
        --no-append) APPEND=0; shift ;;
        --quick) QUICK=1; RUNS=1; DURATION=2s; TAIL=2s; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "bench/run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench/run.sh: --runs must be a positive number" >&2; exit 2; }
# Whole seconds: the Redis row sizes its request count from it.
[[ "$DURATION" =~ ^[1-9][0-9]*s$ ]] || { echo "bench/run.sh: --duration must be whole seconds, like 5s" >&2; exit 2; }
[[ "$TAIL" =~ ^[1-9][0-9]*s$ ]] || { echo "bench/run.sh: --tail-duration must be whole seconds, like 20s" >&2; exit 2; }
[[ "$CONNS" =~ ^[1-9][0-9]*$ ]] || { echo "bench/run.sh: --connections must be a positive number" >&2; exit 2; }

die() { echo "bench/run.sh: $*" >&2; exit 1; }
for tool in cargo curl python3; do command -v "$tool" >/dev/null || die "$tool is missing (install it and rerun)"; done
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "bench: installing redis-server for the Redis INCR comparison..." >&2
        (apt-get update -qq && apt-get install -y -qq redis-server) >/dev/null 2>&1 || true
    fi
fi
HAVE_REDIS=0
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null && HAVE_REDIS=1
[[ $HAVE_REDIS == 1 ]] || echo "bench: redis-server/redis-benchmark not installed: the Redis row is skipped" >&2

echo "bench: building release binaries..." >&2
(cd "$ROOT" && cargo build --release --quiet --workspace --bin leaf --bin leaf-bench --example http_ceiling)
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"
LEAF="$TARGET/leaf" CEILING="$TARGET/examples/http_ceiling"

WORK="$(mktemp -d)"
# Every process this script starts, also from subshells, so the cleanup finds them all.
PIDFILE="$WORK/pids"
: > "$PIDFILE"
cleanup() {
    while read -r p; do kill "$p" 2>/dev/null || true; done < "$PIDFILE"
    # Nodes checkpoint and flush on the way out; let them finish before their dirs go.
    while read -r p; do
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    done < "$PIDFILE"
    rm -rf "$WORK"
}
trap cleanup EXIT
RESULTS="$WORK/results.jsonl"
TOKEN="bench-admin-token-0123456789" SECRET="bench-cluster-secret-0123456789"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
wait_ready() { # url [timeout s]
    local deadline=$(( $(now_ms) + ${2:-30} * 1000 ))
    until [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1/health")" == 200 ]]; do
        (( $(now_ms) < deadline )) || die "$1 not ready"
        sleep 0.02
    done
}
admin() { # url method path [json]
    curl -s -f -o /dev/null -X "$2" -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
        ${4:+-d "$4"} "$1$3" || die "$2 $1$3 failed"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# measure NAME RUN PID ARGS...: one `leaf bench` run against the server process PID, its JSON
# report tagged and kept, with the server's CPU time per request (user + system, from
# /proc/PID/stat over the whole run, warmup included): a steadier figure than throughput on a
# machine the generator shares.
measure() {
    local name="$1" run="$2" pid="$3"; shift 3
    local out c0 c1
    c0="$(cpu_ticks "$pid")"
    out="$("$LEAF" bench --json --warmup 1s -d "$DURATION" "$@")" || die "leaf bench $name failed"
    c1="$(cpu_ticks "$pid")"
    python3 -c 'import json,os,sys
r=json.loads(sys.argv[3]); r["name"]=sys.argv[1]; r["run"]=int(sys.argv[2])
ticks=int(sys.argv[5])-int(sys.argv[4]); hz=os.sysconf("SC_CLK_TCK"); total=r["requests_per_sec"]*(r["seconds"]+1.0)
r["server_cpu_us_per_request"]=ticks/hz*1e6/total if total else None
print(json.dumps(r))' "$name" "$run" "$out" "$c0" "$c1" >> "$RESULTS"
    echo "bench: run $run $name: $(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); l=r["latency_us"]
print("%.0f req/s, %.0f IDs/s, p99.9 %.0f us, errors %d" % (r["requests_per_sec"], r["ids_per_sec"], l["p99_9"], r["errors"] + r["failures"]))' "$out")" >&2
}
# waits URL TAG: requests of TAG that found both buffers empty and waited for a refill so far.
waits() {
    curl -s "$1/metrics" | awk -v t="leaf_segment_waits_total{tag=\"$2\"}" '$1 == t { print $2; found=1 } END { if (!found) print 0 }'
}
extra() { # name value: a single figure for the table
    python3 -c 'import json,sys; print(json.dumps({"name":sys.argv[1],"value":float(sys.argv[2]),"run":0}))' "$1" "$2" >> "$RESULTS"
}
start_node() { # id port data peers [extra env...]; prints the pid
    local id="$1" port="$2" data="$3" peers="$4"; shift 4
    env LEAF_ADMIN_TOKEN="$TOKEN" LEAF_CLUSTER_SECRET="$SECRET" LEAF_BOOTSTRAP_TAGS='[]' RUST_LOG=warn "$@" \
        "$LEAF" serve --node-id "$id" --http-addr "127.0.0.1:$port" --data-dir "$data" ${peers:+--peers "$peers"} \
        >/dev/null 2>>"$WORK/node$id-$port.log" &
    echo $! >> "$PIDFILE"
    echo $!
}
stop_node() { kill "$1" 2>/dev/null || true; while kill -0 "$1" 2>/dev/null; do sleep 0.05; done; }

# The ceiling.
CPORT="$(free_port)"
"$CEILING" "127.0.0.1:$CPORT" >/dev/null 2>&1 &
CPID=$!
echo "$CPID" >> "$PIDFILE"
wait_ready_plain() { until curl -s -o /dev/null --max-time 1 "$1"; do sleep 0.02; done; }
wait_ready_plain "http://127.0.0.1:$CPORT/"

# One node: a large-step tag, a small-step tag pinned by max_step, and snowflake.
P1="$(free_port)"
N1PID="$(start_node 1 "$P1" "$WORK/single" "" LEAF_SEGMENT__MAX_STEP=1000000)"
N1="http://127.0.0.1:$P1"
wait_ready "$N1"
admin "$N1" POST /admin/tags '{"tag":"bench-large","step":1000000}'

for run in $(seq 1 "$RUNS"); do
    measure ceiling "$run" "$CPID" --url "http://127.0.0.1:$CPORT" --path / -c "$CONNS"
    CEIL_QPS="$(python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
print(int([r for r in rows if r["name"]=="ceiling"][-1]["requests_per_sec"]))' "$RESULTS")"
    HALF=$(( CEIL_QPS / 2 ))
    # Small step: a refill every ~10 ms at half the ceiling's rate (dynamic step pinned).
    SMALL=$(( HALF / 100 > 10 ? HALF / 100 : 10 ))
    DURATION="$TAIL" measure ceiling_half "$run" "$CPID" --url "http://127.0.0.1:$CPORT" --path / -c "$CONNS" --rate "$HALF"
    measure segment "$run" "$N1PID" --url "$N1" --path /api/segment/get/bench-large -c "$CONNS"
    measure snowflake "$run" "$N1PID" --url "$N1" --path /api/snowflake/get/bench -c "$CONNS"
    w0="$(waits "$N1" bench-large)"
    DURATION="$TAIL" measure segment_half "$run" "$N1PID" --url "$N1" --path /api/segment/get/bench-large -c "$CONNS" --rate "$HALF"
    extra "waits_large_run$run" $(( $(waits "$N1" bench-large) - w0 ))
    # The small-step node: its own data dir and max_step, so the dynamic step cannot grow.
    PS="$(free_port)"
    SPID="$(start_node 1 "$PS" "$WORK/small-$run" "" LEAF_SEGMENT__MAX_STEP="$SMALL")"
    wait_ready "http://127.0.0.1:$PS"
    admin "http://127.0.0.1:$PS" POST /admin/tags "{\"tag\":\"bench-small\",\"step\":$SMALL}"
    # Warm the tag at the measured rate first: a cold tag has no refill history yet, so its
    # first segments come without a spare (and its very first request always waits).
    "$LEAF" bench --url "http://127.0.0.1:$PS" --path /api/segment/get/bench-small -c "$CONNS" --rate "$HALF" \
        -d 1s --warmup 0s >/dev/null || die "warming bench-small failed"
    w0="$(waits "http://127.0.0.1:$PS" bench-small)"
    DURATION="$TAIL" measure segment_half_small_step "$run" "$SPID" --url "http://127.0.0.1:$PS" --path /api/segment/get/bench-small -c "$CONNS" --rate "$HALF"
    extra "waits_small_run$run" $(( $(waits "http://127.0.0.1:$PS" bench-small) - w0 ))
    stop_node "$SPID"
    measure segment_batch_1000 "$run" "$N1PID" --url "$N1" --path "/api/segment/get/bench-large?count=1000" -c "$CONNS"
    measure snowflake_batch_100000 "$run" "$N1PID" --url "$N1" --path "/api/snowflake/get/bench?count=100000" -c 2
done

# A 3-node cluster; load on one follower.
CP=() PEERS=""
for i in 1 2 3; do CP+=("$(free_port)"); done
PEERS="1=127.0.0.1:${CP[0]},2=127.0.0.1:${CP[1]},3=127.0.0.1:${CP[2]}"
CPIDS=()
for i in 1 2 3; do CPIDS+=("$(start_node "$i" "${CP[$((i-1))]}" "$WORK/cluster$i" "$PEERS" LEAF_SEGMENT__MAX_STEP=1000000)"); done
for i in 1 2 3; do wait_ready "http://127.0.0.1:${CP[$((i-1))]}" 60; done
LEADER="$(curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:${CP[0]}/cluster/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader_id"])')"
FOLLOWER=1; [[ "$LEADER" == 1 ]] && FOLLOWER=2
FURL="http://127.0.0.1:${CP[$((FOLLOWER-1))]}"
admin "http://127.0.0.1:${CP[$((LEADER-1))]}" POST /admin/tags '{"tag":"bench-large","step":1000000}'
wait_ready "$FURL"
for run in $(seq 1 "$RUNS"); do
    # The ceiling again, right before: these rows run minutes after the first ceiling runs, and
    # the machine drifts by more than the target's margin in that time.
    measure ceiling_cluster "$run" "$CPID" --url "http://127.0.0.1:$CPORT" --path / -c "$CONNS"
    measure cluster_segment "$run" "${CPIDS[$((FOLLOWER-1))]}" --url "$FURL" --path /api/segment/get/bench-large -c "$CONNS"
    measure cluster_snowflake "$run" "${CPIDS[$((FOLLOWER-1))]}" --url "$FURL" --path /api/snowflake/get/bench -c "$CONNS"
done

# Redis INCR, same connections.
if [[ $HAVE_REDIS == 1 ]]; then
    RPORT="$(free_port)"
    redis-server --port "$RPORT" --save '' --appendonly no --daemonize no >/dev/null 2>&1 &
    echo $! >> "$PIDFILE"
    until redis-cli -p "$RPORT" ping >/dev/null 2>&1; do sleep 0.05; done
    for run in $(seq 1 "$RUNS"); do
        n=$(( CEIL_QPS * ${DURATION%s} ))
        rps="$(redis-benchmark -p "$RPORT" -c "$CONNS" -n "$n" -t incr --csv -q 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"')"
        extra "redis_incr_run$run" "$rps"
        echo "bench: run $run redis INCR: $rps req/s" >&2
    done
fi

# Start -> healthy, single node, fresh data dir (median of 5).
for i in 1 2 3 4 5; do
    P="$(free_port)"
    t0="$(now_ms)"
    SP="$(start_node 1 "$P" "$WORK/start$i" "")"
    wait_ready "http://127.0.0.1:$P"
    extra "start_to_healthy_ms_$i" $(( $(now_ms) - t0 ))
    stop_node "$SP"
done

# RSS: idle, then with 10,000 tags each serving IDs (every tag's actor and buffers live).
PR="$(free_port)"
RPID="$(start_node 1 "$PR" "$WORK/rss" "")"
NR="http://127.0.0.1:$PR"
wait_ready "$NR"
sleep 1
extra rss_idle_kb "$(awk '/VmRSS/ {print $2}' "/proc/$RPID/status")"
TAGS=10000; [[ $QUICK == 1 ]] && TAGS=1000
echo "bench: creating $TAGS tags and taking an ID from each..." >&2
seq 1 "$TAGS" | xargs -P 32 -I{} curl -s -f -o /dev/null -X POST -H "Authorization: Bearer $TOKEN" \
    -H 'content-type: application/json' -d '{"tag":"t{}","step":1000}' "$NR/admin/tags" || die "creating tags failed"
seq 1 "$TAGS" | xargs -P 32 -I{} curl -s -f -o /dev/null "$NR/api/segment/get/t{}" || die "IDs from the tags failed"
extra rss_tags_kb "$(awk '/VmRSS/ {print $2}' "/proc/$RPID/status")"
extra rss_tag_count "$TAGS"

# Raft allocations through a 3-node cluster (leaf-bench), 64 concurrent proposers.
echo "bench: Raft allocation latency (leaf-bench)..." >&2
"$TARGET/leaf-bench" --bin "$LEAF" --samples "$([[ $QUICK == 1 ]] && echo 200 || echo 1000)" --concurrency 64 \
    > "$WORK/leaf-bench.md" 2>/dev/null || die "leaf-bench failed"

# In-process benches (criterion), short.
echo "bench: in-process benches (criterion)..." >&2
(cd "$ROOT" && cargo bench --quiet -p leaf-node --bench fast_path -- --warm-up-time 1 --measurement-time 3 \
    '1_thread$|real_clock_1_id' 2>/dev/null && cargo bench --quiet -p leaf-raft-store --bench codec -- \
    --warm-up-time 1 --measurement-time 3 2>/dev/null) > "$WORK/criterion.txt" || die "criterion benches failed"

MACHINE="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) vCPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r | cut -d- -f1), $(rustc --version | cut -d' ' -f1-2)"
python3 "$ROOT/bench/table.py" "$RESULTS" "$WORK/leaf-bench.md" "$WORK/criterion.txt" "$MACHINE" \
    "bench/run.sh --runs $RUNS --duration $DURATION --tail-duration $TAIL --connections $CONNS" > "$WORK/table.md"
cat "$WORK/table.md"
if [[ $APPEND == 1 ]]; then
    { echo; cat "$WORK/table.md"; } >> "$ROOT/BENCHMARKS.md"
    echo "bench: appended to BENCHMARKS.md" >&2
fi
