#!/usr/bin/env bash
# What a scoped token costs on the ID path (issue 20), as ratios to anonymous requests in the
# same run, on this machine:
#   bench/tokens.sh LEAF [SECONDS] [ROUNDS]
# LEAF is a `leaf` release binary. One plaintext node on 127.0.0.1 with an admin token and the
# tag bench-orders (step 1000). Each round measures, with wrk (2 threads, 16 keep-alive
# connections, SECONDS each, default 10), single IDs (`GET /api/segment/get/bench-orders`):
# anonymous; anonymous with an ignored header as long as a bearer (what sending a credential
# costs before any check); with the admin token (SHA-256 of both sides, constant-time
# compare); with a scoped token (parse, one atomic load of the token map, a constant-time
# compare with the secret its meter last verified, SHA-256 only on a miss, the pattern check);
# with a scoped token with a quota far above the load (the same, plus one compare-and-swap on
# its bucket); and with quotas in requests and in IDs (two buckets). Prints
# every run, the medians and their ratios.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,15p' "$0"; exit 2; }
LEAF=$1 SECS=${2:-10} ROUNDS=${3:-3}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and ROUNDS must be positive numbers" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
PORT=18584
WORK=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
URL="http://127.0.0.1:$PORT"
ADMIN="bench-admin-token-$RANDOM$RANDOM"
PATH_ID="/api/segment/get/bench-orders"

wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # [BEARER | HEADER:VALUE] -> requests/s
    local h=()
    case ${1:-} in
        '') ;;
        *:*) h=(-H "$1") ;;
        *) h=(-H "Authorization: Bearer $1") ;;
    esac
    wrk -t2 -c16 -d"${SECS}s" -s "$WORK/codes.lua" "${h[@]}" "$URL$PATH_ID" >"$WORK/wrk.txt"
    grep -q 'Non-2xx' "$WORK/wrk.txt" && {
        echo "non-2xx answers:" >&2
        cat "$WORK/wrk.txt" >&2
        tail -5 "$WORK/node.log" >&2
        exit 1
    }
    awk '/^Requests\/sec:/ { printf "%.1f\n", $2 }' "$WORK/wrk.txt"
}
token() { # NAME [QUOTA_JSON [ID_QUOTA_JSON]] -> bearer
    local quota=${2:+,\"quota\":$2}${3:+,\"id_quota\":$3}
    curl -fs -X POST "$URL/admin/tokens" -H "Authorization: Bearer $ADMIN" -H 'content-type: application/json' \
        -d "{\"name\":\"$1\",\"rights\":[\"ids\"],\"tags\":[\"bench-*\"]$quota}" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["bearer"])'
}
# Each thread's first non-200 answer, so a failed run says why.
cat >"$WORK/codes.lua" <<'LUA'
response = function(status, headers, body)
  if status ~= 200 and not seen then seen = true; io.stderr:write("HTTP " .. status .. ": " .. body .. "\n") end
end
LUA
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }

LEAF_ADMIN_TOKEN=$ADMIN "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" >"$WORK/node.log" 2>&1 &
PID=$!
wait_up "$URL/health?mode=segment"
curl -fs -o /dev/null -X POST "$URL/admin/tags" -H "Authorization: Bearer $ADMIN" -H 'content-type: application/json' \
    -d '{"tag":"bench-orders","step":1000}'
SCOPED=$(token bench-scoped)
QUOTA=$(token bench-quota '{"rate_per_sec":1000000,"burst":1000000}')
BOTH=$(token bench-both '{"rate_per_sec":1000000,"burst":1000000}' '{"ids_per_sec":1000000000,"burst_ids":1000000}')
wrk -t1 -c4 -d1s "$URL$PATH_ID" >/dev/null # warm-up

# A header as long as a bearer's, which the node ignores: what sending a credential costs the
# client and the HTTP parser before any check.
PAD=$(printf 'x%.0s' $(seq 1 ${#SCOPED}))
MODES=(anonymous anonymous+header admin-token scoped scoped+quota scoped+both-quotas)
declare -A RUNS
echo "| round | mode | single-ID req/s |"
echo "|---:|---|---:|"
for r in $(seq 1 "$ROUNDS"); do
    for m in "${MODES[@]}"; do
        case $m in
            anonymous) v=$(rate) ;;
            anonymous+header) v=$(rate "X-Padding: $PAD") ;;
            admin-token) v=$(rate "$ADMIN") ;;
            scoped) v=$(rate "$SCOPED") ;;
            scoped+quota) v=$(rate "$QUOTA") ;;
            scoped+both-quotas) v=$(rate "$BOTH") ;;
        esac
        RUNS[$m]+="$v "
        echo "| $r | $m | $v |"
    done
done
echo
echo "| mode | single-ID req/s (median) | ratio to anonymous |"
echo "|---|---:|---:|"
A0=$(median ${RUNS[anonymous]})
for m in "${MODES[@]}"; do
    v=$(median ${RUNS[$m]})
    echo "| $m | $v | $(ratio "$v" "$A0") |"
done
