#!/usr/bin/env bash
# What a follower of a 3-node cluster serves, before/after, on this machine, in one run:
#   bench/follower.sh OLD_LEAF NEW_LEAF [SECONDS] [RUNS]
# OLD_LEAF and NEW_LEAF are two `leaf` release binaries (e.g. built at two commits); the load
# generator is NEW_LEAF's `leaf bench` (64 keep-alive connections, closed loop, SECONDS each,
# default 5; its --path takes {rand}). For each binary, alternating, RUNS times (default 2), a
# fresh plaintext 3-node cluster on 127.0.0.1 and, in requests/s:
#   - on a follower: a known segment tag, random unknown tags (`u-{rand}`, every answer a 404),
#     and a `monotonic` tag (forwarded to the leader);
#   - on the leader: the same segment tag and the same monotonic tag.
# NEW_LEAF runs with `raft.unknown_tags = "local"` (LEAF_RAFT__UNKNOWN_TAGS=local; the default
# since issue 34, set so a build from before the flip measures the same).
# Prints one row per run and binary, with the ratios the issue asks for: unknown/known on the
# follower, monotonic follower/leader, monotonic/segment on the leader.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,12p' "$0"; exit 2; }
OLD=$1 NEW=$2 SECS=${3:-5} RUNS=${4:-2}
[[ "$SECS" =~ ^[1-9][0-9]*$ && "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS and RUNS must be positive numbers" >&2; exit 2; }
for b in "$OLD" "$NEW"; do [[ -x "$b" ]] || { echo "$b is not an executable" >&2; exit 2; }; done
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

SECRET=bench-cluster-secret-0123456789 TOKEN=bench-admin-token-0123456789
PEERS="1=127.0.0.1:18591,2=127.0.0.1:18592,3=127.0.0.1:18593"
wait_up() { for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$1" && return 0; sleep 0.05; done; echo "not up: $1" >&2; return 1; }
rate() { # PATH URL -> requests/s
    "$NEW" bench --url "$2" --path "$1" -c 64 -d "${SECS}s" --warmup 1s --json \
        | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["requests_per_sec"]))'
}
ratio() { python3 -c "print(f'{$1/max($2,1):.2f}')"; }

echo "| run | binary | follower: known | unknown | unknown/known | monotonic | leader: segment | monotonic | monotonic follower/leader | monotonic/segment (leader) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for run in $(seq 1 "$RUNS"); do
    for which in old new; do
        bin=$OLD; [[ $which == new ]] && bin=$NEW
        CL=()
        for i in 1 2 3; do
            rm -rf "$WORK/c$i"
            # The new build answers unknown tags locally when caught up (the old one knows no
            # such setting and refuses unknown ones).
            env=(); [[ $which == new ]] && env=(LEAF_RAFT__UNKNOWN_TAGS=local)
            env "${env[@]}" LEAF_CLUSTER_SECRET=$SECRET LEAF_ADMIN_TOKEN=$TOKEN "$bin" serve --node-id "$i" --data-dir "$WORK/c$i" \
                --http-addr "127.0.0.1:1859$i" --peers "$PEERS" >"$WORK/c$i.log" 2>&1 &
            CL+=($!); PIDS+=($!)
        done
        for i in 1 2 3; do wait_up "http://127.0.0.1:1859$i/health?mode=segment"; done
        leader=$(curl -fs -H "Authorization: Bearer $TOKEN" http://127.0.0.1:18591/cluster/status \
            | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader_id"])')
        f=1; [[ $leader == 1 ]] && f=2
        L="http://127.0.0.1:1859$leader" F="http://127.0.0.1:1859$f"
        curl -fs -o /dev/null -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
            -d '{"tag":"mono","step":10000,"profile":"monotonic"}' "$L/admin/tags"
        wait_up "$F/api/segment/get/mono"
        fk=$(rate /api/segment/get/leaf-segment-test "$F")
        fu=$(rate "/api/segment/get/u-{rand}" "$F")
        fm=$(rate /api/segment/get/mono "$F")
        lk=$(rate /api/segment/get/leaf-segment-test "$L")
        lm=$(rate /api/segment/get/mono "$L")
        echo "| $run | $which | $fk | $fu | $(ratio "$fu" "$fk") | $fm | $lk | $lm | $(ratio "$fm" "$lm") | $(ratio "$lm" "$lk") |"
        for p in "${CL[@]}"; do kill "$p"; done
        for p in "${CL[@]}"; do wait "$p" 2>/dev/null || true; done
    done
done
