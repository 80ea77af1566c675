#!/usr/bin/env bash
# A local leaf cluster on 127.0.0.1 for development and failover experiments.
#
#   deploy/local-cluster.sh up [3|5]   build (release), start every node of N that is not running
#                                      (so it also restarts a killed node), wait until all are ready
#   deploy/local-cluster.sh status     print the cluster status as node 1.. sees it
#   deploy/local-cluster.sh down       stop every node (SIGTERM); data is kept
#   deploy/local-cluster.sh clean      stop and delete the data, certificates, token and secret
#
# Node i serves its public API on https://127.0.0.1:$((8080 + i)) (8081..808N) and keeps its
# data in .local-cluster/node<i>/ at the repository root, with its log in
# .local-cluster/node<i>.log. The admin token and cluster secret are generated once and kept in
# .local-cluster/admin_token and .local-cluster/cluster_secret, so `up` after `down` restarts
# the same cluster.
#
# TLS is on: the first `up` makes a development CA and a certificate per node (for 127.0.0.1
# and localhost) with `leaf certs bundle` in .local-cluster/tls/, and copies the CA certificate
# to .local-cluster/ca.pem for clients:
#   curl --cacert .local-cluster/ca.pem https://127.0.0.1:8081/health
#   leaf cluster status --node https://127.0.0.1:8081 --ca .local-cluster/ca.pem \
#       --token "$(cat .local-cluster/admin_token)"   (/cluster/status takes a credential)
#   (or export LEAF_CA=.local-cluster/ca.pem LEAF_ADMIN_TOKEN="$(cat .local-cluster/admin_token)" once)
# Later `up`s reuse them (a 5-node `up` after `clean` issues all five). LEAF_LOCAL_PLAINTEXT=1
# on the first `up` runs the cluster over plain http instead (allowed: it listens on loopback
# only); the choice is remembered until `clean`.
# Environment: LEAF_LOCAL_BASE_PORT (default 8080; remembered by `up`), LEAF_LOCAL_PLAINTEXT,
# CARGO_TARGET_DIR, RUST_LOG (default info,openraft=warn).
set -euo pipefail
# Everything this script writes (the token, the secret, keys, logs, data) is its owner's alone.
umask 077

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.local-cluster"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/leaf"
if [[ -s "$DIR/base_port" ]]; then BASE_PORT="$(cat "$DIR/base_port")"; else BASE_PORT="${LEAF_LOCAL_BASE_PORT:-8080}"; fi
[[ "$BASE_PORT" =~ ^[0-9]+$ ]] || { echo "local-cluster: bad base port $BASE_PORT" >&2; exit 1; }
# https (the default) or http (LEAF_LOCAL_PLAINTEXT=1 on the first `up`), remembered in $DIR/scheme.
if [[ -s "$DIR/scheme" ]]; then
    SCHEME="$(cat "$DIR/scheme")"
elif [[ "${LEAF_LOCAL_PLAINTEXT:-0}" == 1 ]]; then
    SCHEME=http
else
    SCHEME=https
fi
[[ "$SCHEME" == https || "$SCHEME" == http ]] || { echo "local-cluster: bad scheme $SCHEME in $DIR/scheme" >&2; exit 1; }
TLS_DIR="$DIR/tls"
CA="$DIR/ca.pem"
# What the CLI needs to reach a node: the CA to check its certificate against.
CA_ARGS=()
[[ "$SCHEME" == https ]] && CA_ARGS=(--ca "$CA")

die() { echo "local-cluster: $*" >&2; exit 1; }

random_hex() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

node_count() {
    local n=0
    [[ -f "$DIR/nodes" ]] && n="$(cat "$DIR/nodes")"
    [[ "$n" == 3 || "$n" == 5 ]] && echo "$n" || echo 0
}

running_pid() { # prints the pid of node $1 if that pid is still a leaf process
    local f="$DIR/node$1.pid" pid
    [[ -f "$f" ]] || return 1
    pid="$(cat "$f")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    # A stale pid file (after kill -9) may name a pid the system has reused for another
    # program, or a zombie nobody has reaped yet.
    local info
    info="$(ps -p "$pid" -o stat=,comm= 2>/dev/null)" || return 1
    [[ "$info" =~ ^[[:space:]]*[^Z[:space:]][^[:space:]]*[[:space:]]+leaf$ ]] || return 1
    echo "$pid"
}

url() { echo "$SCHEME://127.0.0.1:$((BASE_PORT + $1))"; }

# The CA and node certificates (idempotent: what exists is kept), and the CA for clients.
certs() {
    local n="$1" args=()
    for i in $(seq 1 "$n"); do args+=(--node "$i=127.0.0.1,localhost"); done
    "$BIN" certs bundle --dir "$TLS_DIR" "${args[@]}" | sed 's/^/  /' >&2
    cp "$TLS_DIR/ca.pem" "$CA.tmp" && mv "$CA.tmp" "$CA"
}

up() {
    local n="${1:-3}"
    [[ "$n" == 3 || "$n" == 5 ]] || die "cluster size must be 3 or 5, not $n"
    local existing
    existing="$(node_count)"
    if [[ "$existing" != 0 && "$existing" != "$n" ]]; then
        die "$DIR holds a $existing-node cluster; run '$0 up $existing', or '$0 clean' first"
    fi
    if [[ -s "$DIR/scheme" && "${LEAF_LOCAL_PLAINTEXT:-0}" == 1 && "$SCHEME" == https ]]; then
        die "$DIR holds a TLS cluster; run '$0 clean' first to start it over plaintext"
    fi
    echo "building leaf (release)..." >&2
    (cd "$ROOT" && cargo build --release --quiet -p leaf-node --bin leaf)
    mkdir -p "$DIR"
    chmod 700 "$DIR"
    [[ -s "$DIR/admin_token" ]] || random_hex > "$DIR/admin_token"
    [[ -s "$DIR/cluster_secret" ]] || random_hex > "$DIR/cluster_secret"
    chmod 600 "$DIR/admin_token" "$DIR/cluster_secret"
    echo "$n" > "$DIR/nodes"
    echo "$BASE_PORT" > "$DIR/base_port"
    echo "$SCHEME" > "$DIR/scheme"
    local tls=()
    if [[ "$SCHEME" == https ]]; then
        echo "certificates (leaf certs bundle):" >&2
        certs "$n"
    fi
    local peers="" started=()
    for i in $(seq 1 "$n"); do peers+="${peers:+,}$i=127.0.0.1:$((BASE_PORT + i))"; done
    for i in $(seq 1 "$n"); do
        if pid="$(running_pid "$i")"; then echo "node $i is already running (pid $pid)" >&2; continue; fi
        tls=()
        [[ "$SCHEME" == https ]] && tls=(--tls-cert "$TLS_DIR/node-$i.pem" --tls-key "$TLS_DIR/node-$i-key.pem" --tls-ca "$TLS_DIR/ca.pem")
        LEAF_ADMIN_TOKEN="$(cat "$DIR/admin_token")" LEAF_CLUSTER_SECRET="$(cat "$DIR/cluster_secret")" \
            RUST_LOG="${RUST_LOG:-info,openraft=warn}" \
            nohup "$BIN" serve --node-id "$i" --http-addr "127.0.0.1:$((BASE_PORT + i))" \
            --data-dir "$DIR/node$i" --peers "$peers" "${tls[@]+"${tls[@]}"}" >>"$DIR/node$i.log" 2>&1 &
        echo $! > "$DIR/node$i.pid"
        started+=("$i")
    done
    # If the wait below fails, do not leave half a cluster running behind the user's back.
    trap 'echo "local-cluster: stopping the nodes this run started" >&2; for i in "${started[@]+"${started[@]}"}"; do stop_node "$i"; done' ERR
    echo "waiting until every node is ready..." >&2
    local deadline=$((SECONDS + 60))
    while :; do
        local ready=0
        for i in $(seq 1 "$n"); do
            running_pid "$i" >/dev/null || { echo "node $i exited; see $DIR/node$i.log" >&2; false; }
            if "$BIN" health --url "$(url "$i")" "${CA_ARGS[@]+"${CA_ARGS[@]}"}" >/dev/null 2>&1; then ready=$((ready + 1)); fi
        done
        [[ "$ready" == "$n" ]] && break
        (( SECONDS < deadline )) || { echo "not all nodes ready within 60 s; see $DIR/node*.log" >&2; false; }
        sleep 0.2
    done
    trap - ERR
    echo "leaf cluster of $n nodes is up:"
    for i in $(seq 1 "$n"); do echo "  node $i  $(url "$i")"; done
    echo "admin token: $(cat "$DIR/admin_token")   (also in $DIR/admin_token)"
    if [[ "$SCHEME" == https ]]; then
        echo "CA certificate: $CA   (TLS; LEAF_LOCAL_PLAINTEXT=1 after 'clean' for plain http)"
        echo "try:  curl --cacert $CA $(url 1)/api/segment/get/leaf-segment-test"
        echo "      $BIN cluster status --node $(url 1) --ca $CA --token \$(cat $DIR/admin_token)"
        echo "      (or: export LEAF_CA=$CA LEAF_ADMIN_TOKEN=\$(cat $DIR/admin_token))"
    else
        echo "try:  curl $(url 1)/api/segment/get/leaf-segment-test"
        echo "      $BIN cluster status --node $(url 1) --token \$(cat $DIR/admin_token)"
    fi
}

stop_node() { # SIGTERM node $1, SIGKILL after 15 s
    local pid
    pid="$(running_pid "$1")" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 15))
    while kill -0 "$pid" 2>/dev/null; do
        if (( SECONDS >= deadline )); then kill -9 "$pid" 2>/dev/null || true; break; fi
        sleep 0.1
    done
    rm -f "$DIR/node$1.pid"
    echo "node $1 stopped"
}

down() {
    local n any=0
    n="$(node_count)"
    for i in $(seq 1 "$(( n > 0 ? n : 5 ))"); do
        if running_pid "$i" >/dev/null; then any=1; stop_node "$i"; fi
    done
    rm -f "$DIR"/node*.pid
    [[ "$any" == 1 ]] || echo "no node was running"
}

status() {
    local n
    n="$(node_count)"
    [[ "$n" != 0 ]] || die "no local cluster in $DIR; run '$0 up 3'"
    for i in $(seq 1 "$n"); do
        if pid="$(running_pid "$i")"; then echo "node $i  $(url "$i")  running (pid $pid)"; else echo "node $i  $(url "$i")  stopped"; fi
    done
    for i in $(seq 1 "$n"); do
        local out
        if running_pid "$i" >/dev/null && out="$(LEAF_ADMIN_TOKEN="$(cat "$DIR/admin_token")" "$BIN" cluster status --node "$(url "$i")" "${CA_ARGS[@]+"${CA_ARGS[@]}"}")"; then
            if command -v python3 >/dev/null; then python3 -m json.tool <<<"$out"; else echo "$out"; fi
            return 0
        fi
    done
    die "no running node answered"
}

case "${1:-}" in
    up) up "${2:-3}" ;;
    down) down ;;
    status) status ;;
    clean) down; rm -rf "$DIR"; echo "removed $DIR" ;;
    *) echo "usage: $0 up [3|5] | status | down | clean" >&2; exit 2 ;;
esac
