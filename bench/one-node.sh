# Shared by bench/cycles.sh and bench/scrape.sh (sourced, not run): one plaintext node on
# 127.0.0.1 with TAGS tags, a Zipf load over them, and the wait for the idle sweep.
# The caller sets LEAF, TAGS and PORT; the caller's LEAF_* variables reach the node.
WORK=$(mktemp -d) URL="http://127.0.0.1:$PORT" PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
# Names padded to the width of the last one, as `leaf bench` writes `{zipf}` ranks.
WIDTH=${#TAGS}
(( TAGS > 1 )) && WIDTH=$(( ${#TAGS} - ( $(( TAGS - 1 )) < 10 ** (${#TAGS} - 1) ? 1 : 0 ) ))

# Starts the node (the idle sweep after 20 s) and creates the tags `t-…`.
start_with_tags() {
    LEAF_SEGMENT__IDLE_UNLOAD_SECS=20 "$LEAF" serve --data-dir "$WORK/data" --http-addr "127.0.0.1:$PORT" \
        >>"$WORK/node.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 200); do curl -fs -o /dev/null --max-time 1 "$URL/health?mode=segment" && break; sleep 0.05; done
    python3 -c "
import json
for i in range($TAGS): print(json.dumps({'tag': f't-{i:0${WIDTH}d}', 'step': 1000}))" >"$WORK/tags.jsonl"
    "$LEAF" tag create-batch "$WORK/tags.jsonl" --url "$URL" >/dev/null
}

# 10 s of single IDs over a Zipf rank of the tags (s = 1.1, 32 connections).
zipf_load() {
    "$LEAF" bench --url "$URL" --path "/api/segment/get/t-{zipf}" --zipf-tags "$TAGS" --zipf-s 1.1 -c 32 -d 10s \
        --warmup 1s --json >/dev/null
}

# Waits (up to 120 s) until the idle sweep has unloaded the tags.
wait_swept() {
    local n
    for _ in $(seq 1 120); do
        n=$(curl -fs "$URL/cache" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
        (( n <= 1 )) && return 0
        sleep 1
    done
    echo "the idle sweep left $n tags loaded" >&2
}
