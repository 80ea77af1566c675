#!/usr/bin/env bash
# Full against resumed TLS handshakes, and HTTPS batches against plaintext, on this machine:
#   bench/tls-resume.sh LEAF [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary with `leaf-conn-bench` next to it (or LEAF_CONN_BENCH). Each
# round runs, alternating, a plaintext node then a TLS node (a fresh one-node cluster on
# 127.0.0.1, certificates from `leaf certs`), SECONDS each (default 5):
#   new-conn: `GET /api/segment/get/leaf-segment-test` on a new connection per request,
#             leaf-conn-bench, 32 concurrent: plaintext; TLS with every handshake a full one
#             (`--no-resume`); TLS resuming the session (one client config, as one program);
#   s_time:   `openssl s_time -new` against `-reuse` (one connection at a time, GET /health),
#             TLS node only: handshakes per second with and without session resumption;
#   batch:    keep-alive `...?count=1000` with wrk (2 threads, 64 connections; 1 pinned with
#             PIN_CORES=1): IDs/s.
# Prints every run, then the medians and each as a ratio of its same-round plaintext figure
# (s_time: of the plaintext new-conn one). Needs wrk, openssl and curl.
# PIN_CORES=1 runs each node on CPU 0 and the batch step's wrk (1 thread) on CPU 1 (taskset):
# the client's decryption then does not take the node's cycles, so the batch ratio is the
# node's own TLS cost; the other steps run with the node pinned too.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,17p' "$0"; exit 2; }
LEAF=$1 SECS=${2:-5} ROUNDS=${3:-3}
CONN=${LEAF_CONN_BENCH:-$(dirname "$LEAF")/leaf-conn-bench}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
for b in "$LEAF" "$CONN"; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
for c in wrk openssl curl; do command -v "$c" >/dev/null || { echo "$c is not installed" >&2; exit 2; }; done
PIN=() WRK_PIN=() WRK_T=2
[[ ${PIN_CORES:-0} =~ ^[01]$ ]] || { echo "PIN_CORES must be 0 or 1" >&2; exit 2; }
if [[ ${PIN_CORES:-0} == 1 ]]; then
    command -v taskset >/dev/null || { echo "taskset is not installed" >&2; exit 2; }
    PIN=(taskset -c 0) WRK_PIN=(taskset -c 1) WRK_T=1
fi
PORT=18582
WORK=$(mktemp -d)
PID= BASE=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$LEAF" certs ca --dir "$WORK/tls" >/dev/null
"$LEAF" certs node --dir "$WORK/tls" --id 1 --host 127.0.0.1 >/dev/null
CA=$WORK/tls/ca.pem
PATH_ONE=/api/segment/get/leaf-segment-test

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 --cacert "$CA" "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
batch() { # BASE -> IDs/s
    "${WRK_PIN[@]}" wrk -t"$WRK_T" -c64 -d"${SECS}s" "$1$PATH_ONE?count=1000" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && { echo "non-2xx answers:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
    awk '/^Requests\/sec:/ { printf "%d\n", $2 * 1000 }' "$WORK/wrk.txt"
}
newconn() { # URL [args...] -> requests/s (fails on any failed request, or on too few resumed)
    local out rate fraction errors
    out=$("$CONN" --url "$1" --ca "$CA" --concurrency 32 --seconds "$SECS" "${@:2}" 2>>"$WORK/conn.err")
    read -r rate fraction errors <<<"$out"
    [[ $errors == 0 ]] || { echo "$errors requests failed on new connections: $1 ${*:2}" >&2; exit 1; }
    echo "$rate $fraction"
}
stime() { # -new|-reuse -> handshakes/s
    local started out n
    started=$(date +%s.%N)
    out=$(openssl s_time -connect "127.0.0.1:$PORT" -CAfile "$CA" -www /health -time "$SECS" "$1" 2>&1)
    n=$(awk '/connections in .* real seconds/ { print $1; exit }' <<<"$out")
    [[ -n $n ]] || { echo "openssl s_time $1: $out" >&2; exit 1; }
    python3 -c "import time; print(f'{$n / (time.time() - $started):.0f}')"
}
start() { # plain|tls: starts the node (PID), its base URL in BASE
    local scheme=http args=()
    if [[ $1 == tls ]]; then
        scheme=https
        args=(--tls-cert "$WORK/tls/node-1.pem" --tls-key "$WORK/tls/node-1-key.pem" --tls-ca "$CA")
    fi
    rm -rf "$WORK/data"
    # The batch step asks ~28 M IDs/s from one address, above the anonymous quota (10 M/s by
    # default), which would answer 429: this measures the transport, so the quota is off.
    LEAF_AUTH__ANONYMOUS_IDS_PER_SEC=0 "${PIN[@]}" "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" "${args[@]}" >"$WORK/node.log" 2>&1 &
    PID=$!
    BASE="$scheme://127.0.0.1:$PORT"
    wait_up "$BASE/health?mode=segment"
    wrk -t1 -c8 -d1s "$BASE$PATH_ONE" >/dev/null # warm-up
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

PN=() PB=() TF=() TR=() TB=() SN=() SR=() FR=()
echo "| round | plain new-conn req/s | TLS full new-conn req/s | TLS resumed new-conn req/s (resumed share) | s_time -new /s | s_time -reuse /s | plain batch IDs/s | TLS batch IDs/s |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    start plain
    read -r pn _ <<<"$(newconn "$BASE$PATH_ONE")"
    pb=$(batch "$BASE")
    stop
    start tls
    read -r tf _ <<<"$(newconn "$BASE$PATH_ONE" --no-resume)"
    read -r tr fr <<<"$(newconn "$BASE$PATH_ONE")"
    sn=$(stime -new) sr=$(stime -reuse)
    tb=$(batch "$BASE")
    stop
    PN+=("$pn") PB+=("$pb") TF+=("$tf") TR+=("$tr") SN+=("$sn") SR+=("$sr") TB+=("$tb") FR+=("$fr")
    echo "| $r | $pn | $tf | $tr ($fr) | $sn | $sr | $pb | $tb |"
done
pn=$(median "${PN[@]}") pb=$(median "${PB[@]}") tf=$(median "${TF[@]}") tr=$(median "${TR[@]}")
sn=$(median "${SN[@]}") sr=$(median "${SR[@]}") tb=$(median "${TB[@]}") fr=$(median "${FR[@]}")
echo
echo "| measurement (median of $ROUNDS) | value | ÷ plaintext | ÷ full handshake |"
echo "|---|---:|---:|---:|"
echo "| plaintext, new connection per request, req/s | $pn | 1.000 | |"
echo "| TLS, full handshake per request, req/s | $tf | $(ratio "$tf" "$pn") | 1.000 |"
echo "| TLS, resumed handshake per request, req/s (resumed share $fr) | $tr | $(ratio "$tr" "$pn") | $(ratio "$tr" "$tf") |"
echo "| openssl s_time -new, handshakes/s (1 at a time) | $sn | $(ratio "$sn" "$pn") | 1.000 |"
echo "| openssl s_time -reuse, handshakes/s (1 at a time) | $sr | $(ratio "$sr" "$pn") | $(ratio "$sr" "$sn") |"
echo "| plaintext, keep-alive batch of 1,000, IDs/s | $pb | 1.000 | |"
echo "| TLS, keep-alive batch of 1,000, IDs/s | $tb | $(ratio "$tb" "$pb") | |"
