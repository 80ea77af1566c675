#!/usr/bin/env bash
# Backups of a large state (issue 32), on this machine:
#   bench/backup.sh LEAF [TAGS] [ROUNDS]
# LEAF is a `leaf` release binary. A 3-node TLS cluster on 127.0.0.1 (certificates from
# `leaf certs bundle`, an admin token) gets TAGS segment tags (default 40,000) through
# `leaf tag create-batch`, with an ID taken from every 100th so counters differ. Then ROUNDS
# (default 3) rounds, each timing, through node 1:
# - the baseline: `leaf tag list` into a file (what the manual backup of earlier releases was:
#   tags only, no tokens, keys, templates, trail or snowflake marks);
# - `leaf backup --out`: the whole state, downloaded and read back whole;
# - the same encrypted to an age recipient;
# - `leaf backup verify` of the plain file;
# - `leaf restore` of it into a blank data directory (the plan and the new node's store).
# Prints each round's seconds and sizes, and the ratios to the baseline.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,15p' "$0"; exit 2; }
LEAF=$1 TAGS=${2:-40000} ROUNDS=${3:-3}
for n in "$TAGS" "$ROUNDS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "TAGS and ROUNDS must be positive numbers" >&2; exit 2; }
done
(( TAGS <= 999990 )) || { echo "TAGS: at most 999990" >&2; exit 2; }
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
LEAF=$(realpath "$LEAF")
BASE=${LEAF_BENCH_BASE_PORT:-18740}
WORK=$(mktemp -d)
PIDS=()
ok=0
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ $ok == 1 ]]; then rm -rf "$WORK"; else echo "logs kept in $WORK" >&2; fi
}
trap cleanup EXIT
export LEAF_CA="$WORK/tls/ca.pem" LEAF_ADMIN_TOKEN
LEAF_ADMIN_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
PEERS="1=127.0.0.1:$((BASE + 1)),2=127.0.0.1:$((BASE + 2)),3=127.0.0.1:$((BASE + 3))"
URL="https://127.0.0.1:$((BASE + 1))"
"$LEAF" certs bundle --dir "$WORK/tls" --node 1=127.0.0.1,localhost --node 2=127.0.0.1,localhost \
    --node 3=127.0.0.1,localhost >/dev/null
for i in 1 2 3; do
    LEAF_CLUSTER_SECRET="$SECRET" RUST_LOG=info,openraft=warn \
        "$LEAF" serve --node-id "$i" --http-addr "127.0.0.1:$((BASE + i))" --data-dir "$WORK/node$i" \
        --peers "$PEERS" --tls-cert "$WORK/tls/node-$i.pem" --tls-key "$WORK/tls/node-$i-key.pem" \
        --tls-ca "$WORK/tls/ca.pem" >>"$WORK/node$i.log" 2>&1 &
    PIDS+=($!)
done
deadline=$((SECONDS + 60))
until "$LEAF" health --quiet --url "$URL" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || { echo "node 1 not ready within 60 s" >&2; exit 1; }
    sleep 0.1
done
python3 -c 'import json, sys; [print(json.dumps({"tag": f"t-{i:07d}", "step": 1000})) for i in range(int(sys.argv[1]))]' \
    "$TAGS" >"$WORK/tags.jsonl"
"$LEAF" tag create-batch "$WORK/tags.jsonl" --url "$URL" >/dev/null
for ((i = 0; i < TAGS && i < 40000; i += 100)); do
    "$LEAF" get segment "$(printf 't-%07d' "$i")" --url "$URL" >/dev/null
done
RECIPIENT=$("$LEAF" backup keygen --out "$WORK/key.txt" 2>/dev/null)

secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
size_mb() { python3 -c "import os, sys; print(f'{os.path.getsize(sys.argv[1]) / 1e6:.1f}')" "$1"; }
timed() { # timed CMD...: seconds CMD took (its output discarded)
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s.%N)
    secs "$t0" "$t1"
}
echo "| round | tag list s | tag list MB | backup s | backup MB | encrypted s | encrypted MB | verify s | restore s | backup ÷ list (time) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for ((r = 1; r <= ROUNDS; r++)); do
    rm -f "$WORK"/list.json "$WORK"/b.leafbak "$WORK"/b.leafbak.age
    rm -rf "$WORK/restored"
    t_list=$(timed sh -c "\"$LEAF\" tag list --url $URL > $WORK/list.json")
    t_backup=$(timed "$LEAF" backup --out "$WORK/b.leafbak" --url "$URL")
    t_enc=$(timed "$LEAF" backup --out "$WORK/b.leafbak.age" --recipient "$RECIPIENT" --url "$URL")
    t_verify=$(timed "$LEAF" backup verify "$WORK/b.leafbak")
    t_restore=$(timed "$LEAF" restore "$WORK/b.leafbak" --data-dir "$WORK/restored" --node-id 1 \
        --http-addr 127.0.0.1:9 --allow-exhausted)
    [[ -d "$WORK/restored/raft" ]] || { echo "the restore wrote nothing" >&2; exit 1; }
    ratio=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$t_backup" "$t_list")
    echo "| $r | $t_list | $(size_mb "$WORK/list.json") | $t_backup | $(size_mb "$WORK/b.leafbak") | $t_enc |" \
        "$(size_mb "$WORK/b.leafbak.age") | $t_verify | $t_restore | $ratio |"
done
ok=1
