#!/usr/bin/env bash
# Disk use after a million tags (issue 51), on this machine:
#   bench/disk.sh LEAF [TAGS] [SETTLE_SECONDS]
# One plaintext node on 127.0.0.1 (`raft.snapshot_every` 10,000): creates TAGS tags (default
# 999,990) with `leaf tag create-batch` (10,000 per request), waits SETTLE_SECONDS (default 20)
# for the snapshots to catch up, measures the data directory while the node runs (and the bytes
# of deleted files it still holds open, which `du` does not see), `kill -9`s it, restarts it and
# times the restart to a ready `/health`, checks the last tag serves, then prints the bytes of the
# data directory and of its snapshot files, the snapshots built, and the rewrites of sled's files
# logged while it ran and at the restart.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,8p' "$0"; exit 2; }
LEAF=$1 TAGS=${2:-999990} SETTLE=${3:-20}
[[ -x "$LEAF" ]] || { echo "$LEAF is not an executable" >&2; exit 2; }
(( TAGS >= 1 && TAGS <= 999990 )) || { echo "TAGS: 1 to 999990" >&2; exit 2; }
PORT=18632 URL=http://127.0.0.1:18632
W=$(mktemp -d) PID=
cleanup() { [[ -n $PID ]] && kill -9 "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
serve() {
    LEAF_RAFT__SNAPSHOT_EVERY=10000 "$LEAF" serve --data-dir "$W/data" --http-addr "127.0.0.1:$PORT" >>"$W/node.log" 2>&1 &
    PID=$!
}
ready() { for _ in $(seq 1 1200); do curl -fs -o /dev/null "$URL/health?mode=segment" && return 0; sleep 0.05; done; return 1; }
serve
ready
python3 -c "
import json
for i in range($TAGS): print(json.dumps({'tag': f't-{i:06d}', 'step': 1000}))" >"$W/tags.jsonl"
T0=$(date +%s.%N)
"$LEAF" tag create-batch "$W/tags.jsonl" --url "$URL" >/dev/null
T1=$(date +%s.%N)
sleep "$SETTLE"
RUN_DATA=$(du -sb "$W/data" | cut -f1)
RUN_SNAP=$(du -cb "$W"/data/raft/snapshots/*.snap | tail -1 | cut -f1)
HELD=0
for f in /proc/$PID/fd/*; do
    l=$(readlink "$f" || true)
    if [[ $l == "$W"*"(deleted)" ]]; then HELD=$((HELD + $(stat -Lc %s "$f" 2>/dev/null || echo 0))); fi
done
REWRITES=$(grep -c "rewrote sled" "$W/node.log" || true)
kill -9 "$PID"; wait "$PID" 2>/dev/null || true
BUILT=$(grep -c "built snapshot" "$W/node.log" || true)
T2=$(date +%s.%N)
serve
ready
T3=$(date +%s.%N)
LAST=$(curl -fs "$URL/api/segment/get/t-$(printf %06d $((TAGS - 1)))")
kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=
DATA=$(du -sb "$W/data" | cut -f1)
SNAP=$(du -cb "$W"/data/raft/snapshots/*.snap | tail -1 | cut -f1)
echo "| tags | created in | snapshots built | rewrites while running | running: data directory (+ deleted, held open) | snapshot files | ratio | restart to ready | last tag's ID | after the restart: data directory | snapshot files | ratio |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
python3 -c "print(f'| $TAGS | {$T1 - $T0:.1f} s | $BUILT | $REWRITES | $RUN_DATA B (+ $HELD B) | $RUN_SNAP B | {($RUN_DATA + $HELD) / $RUN_SNAP:.2f} × | {$T3 - $T2:.2f} s | $LAST | $DATA B | $SNAP B | {$DATA / $SNAP:.2f} × |')"
grep "rewrote sled" "$W/node.log" || echo "(no rewrite of sled's files)"
