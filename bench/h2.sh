#!/usr/bin/env bash
# Single-ID QPS over HTTP/2 with h2load: the leaf edge against the bare hyper ceiling:
#   bench/h2.sh LEAF CEILING [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary, CEILING node/examples/http_ceiling (release; it serves h2c
# with prior knowledge too). Each round runs, alternating, the ceiling, a plaintext leaf node
# and a TLS leaf node (fresh one-node clusters on 127.0.0.1, certificates from `leaf certs`),
# each measured with h2load, 2 threads, 16 connections x 16 concurrent streams, SECONDS (default
# 10) after a 1 s warm-up, on `GET /api/segment/get/leaf-segment-test`:
#   h2c: plaintext, HTTP/2 with prior knowledge (the ceiling and the plaintext node);
#   h2:  TLS with ALPN `h2` offered alone (`--npn-list=h2`: leaf prefers http/1.1 when a
#        client offers both, so a client that wants HTTP/2 over TLS offers h2 only, as gRPC does).
# Prints every run, then the medians, each as a ratio of the ceiling's h2c and of leaf's h2c.
# Needs h2load (Debian's nghttp2-client) and curl.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,13p' "$0"; exit 2; }
LEAF=$1 CEILING=$2 SECS=${3:-10} ROUNDS=${4:-3}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
for b in "$LEAF" "$CEILING"; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
command -v h2load >/dev/null || { echo "h2load is not installed (apt-get install nghttp2-client)" >&2; exit 2; }
PORT=18583
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$LEAF" certs ca --dir "$WORK/tls" >/dev/null
"$LEAF" certs node --dir "$WORK/tls" --id 1 --host 127.0.0.1 >/dev/null
URL_PATH=/api/segment/get/leaf-segment-test

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 --cacert "$WORK/tls/ca.pem" "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # URL -> requests/s (fails unless every request got a 2xx over HTTP/2)
    h2load -t2 -c16 -m16 -D "$SECS" --warm-up-time=1 --npn-list=h2 "$1" >"$WORK/h2load.txt" 2>&1 ||
        { cat "$WORK/h2load.txt" >&2; exit 1; }
    grep -q '^Application protocol: h2' "$WORK/h2load.txt" || { echo "not HTTP/2:" >&2; cat "$WORK/h2load.txt" >&2; exit 1; }
    awk '/^requests:/ { done = $6; ok = $8 } /^status codes:/ { twoxx = $3 }
         END { if (done == 0 || ok != done || twoxx != done) { print "failed requests" > "/dev/stderr"; exit 1 } }' \
        "$WORK/h2load.txt" || { cat "$WORK/h2load.txt" >&2; exit 1; }
    awk '/^finished in/ { gsub(/,/, "", $4); printf "%d\n", $4 }' "$WORK/h2load.txt"
}
leaf() { # plain|tls -> requests/s
    local scheme=http args=()
    if [[ $1 == tls ]]; then
        scheme=https
        args=(--tls-cert "$WORK/tls/node-1.pem" --tls-key "$WORK/tls/node-1-key.pem" --tls-ca "$WORK/tls/ca.pem")
    fi
    rm -rf "$WORK/data"
    "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" "${args[@]}" >"$WORK/node.log" 2>&1 &
    PID=$!
    wait_up "$scheme://127.0.0.1:$PORT/health?mode=segment"
    rate "$scheme://127.0.0.1:$PORT$URL_PATH"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}
ceiling() {
    "$CEILING" "127.0.0.1:$PORT" >/dev/null 2>&1 &
    PID=$!
    wait_up "http://127.0.0.1:$PORT/"
    rate "http://127.0.0.1:$PORT$URL_PATH"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

C=() P=() T=()
echo "| round | ceiling h2c req/s | leaf h2c req/s | leaf h2 (TLS) req/s |"
echo "|---:|---:|---:|---:|"
for r in $(seq 1 "$ROUNDS"); do
    c=$(ceiling) p=$(leaf plain) t=$(leaf tls)
    C+=("$c") P+=("$p") T+=("$t")
    echo "| $r | $c | $p | $t |"
done
c=$(median "${C[@]}") p=$(median "${P[@]}") t=$(median "${T[@]}")
echo
echo "| h2load -c 16 -m 16 (median of $ROUNDS) | req/s | ÷ ceiling h2c | ÷ leaf h2c |"
echo "|---|---:|---:|---:|"
echo "| ceiling, h2c (prior knowledge) | $c | 1.000 | |"
echo "| leaf, h2c (prior knowledge) | $p | $(ratio "$p" "$c") | 1.000 |"
echo "| leaf, h2 over TLS (ALPN) | $t | $(ratio "$t" "$c") | $(ratio "$t" "$p") |"
