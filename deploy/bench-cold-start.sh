#!/usr/bin/env bash
# Image size and cold start (start -> /health 200), the container against the same static
# binary run as a plain process (the baseline, measured in the same run), and the 3-node
# compose cluster from `up -d` to every node ready and to Docker's healthcheck saying healthy.
#
#   deploy/bench-cold-start.sh [ROUNDS]      default 5 rounds; needs curl, docker, docker-compose
#
# Builds the image first (deploy/build-image.sh). Prints medians in milliseconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-5}"
IMAGE="${LEAF_IMAGE:-leaf:latest}"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/x86_64-unknown-linux-gnu/release/leaf"
PORT=18480
PROJECT="leafbench$$"

"$ROOT/deploy/build-image.sh" "$IMAGE" >/dev/null
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# Polls $1/health every 10 ms until it answers 200 (at most 60 s); prints the ms since $2.
ready_after() {
    until [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1/health")" == 200 ]]; do
        (( $(now_ms) - $2 < 60000 )) || { echo "bench-cold-start: $1 not ready after 60 s" >&2; exit 1; }
        sleep 0.01
    done
    echo $(( $(now_ms) - $2 ))
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

DATA="$(mktemp -d)"
# An empty --env-file: an operator's deploy/.env must not change the measured cluster.
: > "$DATA/empty.env"
cleanup() {
    docker rm -f "${PROJECT}single" >/dev/null 2>&1 || true
    LEAF_CLUSTER_SECRET=x LEAF_ADMIN_TOKEN=x docker-compose --env-file "$DATA/empty.env" -p "$PROJECT" \
        -f "$ROOT/deploy/docker-compose.yml" down -v --remove-orphans >/dev/null 2>&1 || true
    rm -rf "$DATA"
}
trap cleanup EXIT

process=() container=() cluster=() healthy=()
for ((i = 0; i < ROUNDS; i++)); do
    # Baseline: the same binary as a process, fresh data dir, one-node cluster.
    rm -rf "$DATA/node"
    t0="$(now_ms)"
    "$BIN" serve --data-dir "$DATA/node" --http-addr "127.0.0.1:$PORT" 2>/dev/null &
    pid=$!
    process+=("$(ready_after "http://127.0.0.1:$PORT" "$t0")")
    kill "$pid"; wait "$pid" || true

    # The image: docker run (create + start) of a fresh container and volume.
    t0="$(now_ms)"
    docker run -d --name "${PROJECT}single" -p "127.0.0.1:$PORT:8080" "$IMAGE" >/dev/null
    container+=("$(ready_after "http://127.0.0.1:$PORT" "$t0")")
    docker rm -f -v "${PROJECT}single" >/dev/null

    # The 3-node compose cluster: up -d -> every node ready; -> Docker reports all healthy.
    export LEAF_CLUSTER_SECRET="bench-secret-0123456789abcdef" LEAF_ADMIN_TOKEN="bench-token-0123456789abcdef"
    export LEAF1_PORT=$((PORT + 1)) LEAF2_PORT=$((PORT + 2)) LEAF3_PORT=$((PORT + 3)) LEAF_IMAGE="$IMAGE"
    C="docker-compose --env-file $DATA/empty.env -p $PROJECT -f $ROOT/deploy/docker-compose.yml"
    t0="$(now_ms)"
    $C up -d >/dev/null 2>&1
    for n in 1 2 3; do last="$(ready_after "http://127.0.0.1:$((PORT + n))" "$t0")"; done
    cluster+=("$last")
    until [[ "$($C ps | grep -c '(healthy)')" == 3 ]]; do
        (( $(now_ms) - t0 < 90000 )) || { echo "bench-cold-start: not healthy after 90 s" >&2; exit 1; }
        sleep 0.05
    done
    healthy+=("$(( $(now_ms) - t0 ))")
    $C down -v >/dev/null 2>&1
done

size="$(docker image inspect -f '{{.Size}}' "$IMAGE")"
p="$(printf '%s\n' "${process[@]}" | median)"
c="$(printf '%s\n' "${container[@]}" | median)"
echo "image $IMAGE: $size bytes ($(( size / 1024 / 1024 )) MiB); static binary $(stat -c %s "$BIN") bytes unstripped"
echo "rounds: $ROUNDS (medians, ms)"
echo "process start -> ready (baseline):      $p   [${process[*]}]"
echo "docker run -> ready (1 node):           $c   [${container[*]}]   ratio $(awk "BEGIN { printf \"%.2f\", $c / $p }")"
echo "compose up -d -> 3 nodes ready:         $(printf '%s\n' "${cluster[@]}" | median)   [${cluster[*]}]"
echo "compose up -d -> 3 nodes Docker-healthy: $(printf '%s\n' "${healthy[@]}" | median)   [${healthy[*]}]"
