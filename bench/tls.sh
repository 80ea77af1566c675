#!/usr/bin/env bash
# HTTPS against plaintext on the same `leaf` binary, on this machine:
#   bench/tls.sh LEAF [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. Each round runs, alternating, a plaintext node then a TLS
# node (a fresh one-node cluster on 127.0.0.1 each time, certificates from `leaf certs`), and
# on each measures with wrk (2 threads, 64 connections, SECONDS each, default 10):
#   single: keep-alive `GET /api/segment/get/leaf-segment-test` (one ID per request);
#   batch:  keep-alive `...?count=1000` (IDs/s = requests/s x 1000);
#   new-conn: the single-ID request with `Connection: close`, so every request opens a new
#             TCP connection (and, on the TLS node, does a full handshake: the handshake cost).
# Prints every run, then the medians and each TLS median as a ratio of the plaintext one.
# Needs `wrk` (Debian's package; it does not verify certificates) and curl.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,11p' "$0"; exit 2; }
LEAF=$1 SECS=${2:-10} ROUNDS=${3:-3}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
PORT=18581
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$LEAF" certs ca --dir "$WORK/tls" >/dev/null
"$LEAF" certs node --dir "$WORK/tls" --id 1 --host 127.0.0.1 >/dev/null

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 --cacert "$WORK/tls/ca.pem" "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # URL [wrk args...] -> requests/s
    local url=$1; shift
    wrk -t2 -c64 -d"${SECS}s" "$@" "$url" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && { echo "non-2xx answers:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
    awk '/^Requests\/sec:/ { printf "%d\n", $2 }' "$WORK/wrk.txt"
}
run() { # plain|tls -> "single batch newconn"
    local scheme=http args=()
    if [[ $1 == tls ]]; then
        scheme=https
        args=(--tls-cert "$WORK/tls/node-1.pem" --tls-key "$WORK/tls/node-1-key.pem" --tls-ca "$WORK/tls/ca.pem")
    fi
    rm -rf "$WORK/data"
    "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" "${args[@]}" >"$WORK/node.log" 2>&1 &
    PID=$!
    local base="$scheme://127.0.0.1:$PORT"
    wait_up "$base/health?mode=segment"
    wrk -t1 -c8 -d1s "$base/api/segment/get/leaf-segment-test" >/dev/null # warm-up
    local s b n
    s=$(rate "$base/api/segment/get/leaf-segment-test")
    b=$(rate "$base/api/segment/get/leaf-segment-test?count=1000")
    n=$(rate "$base/api/segment/get/leaf-segment-test" -H "Connection: close")
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    echo "$s $b $n"
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

PS=() PB=() PN=() TS=() TB=() TN=()
echo "| round | plain single req/s | TLS single req/s | plain batch IDs/s | TLS batch IDs/s | plain new-conn req/s | TLS new-conn req/s |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    read -r ps pb pn < <(run plain)
    read -r ts tb tn < <(run tls)
    PS+=("$ps") PB+=("$((pb * 1000))") PN+=("$pn") TS+=("$ts") TB+=("$((tb * 1000))") TN+=("$tn")
    echo "| $r | $ps | $ts | $((pb * 1000)) | $((tb * 1000)) | $pn | $tn |"
done
ms=$(median "${PS[@]}") mb=$(median "${PB[@]}") mn=$(median "${PN[@]}")
ts=$(median "${TS[@]}") tb=$(median "${TB[@]}") tn=$(median "${TN[@]}")
echo
echo "| measurement (median of $ROUNDS) | plaintext | TLS | TLS ÷ plaintext |"
echo "|---|---:|---:|---:|"
echo "| keep-alive single ID, req/s | $ms | $ts | $(ratio "$ts" "$ms") |"
echo "| keep-alive batch of 1,000, IDs/s | $mb | $tb | $(ratio "$tb" "$mb") |"
echo "| new connection per request, req/s | $mn | $tn | $(ratio "$tn" "$mn") |"
