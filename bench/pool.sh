#!/usr/bin/env bash
# IdPool::next_id() per thread, in process (client/benches/next_id.rs): 1 thread, and 2 threads
# sharing one TagPool, against a fake source of 1,000,000-ID ranges. Prints criterion's
# throughput lines (IDs/s; for 2 threads the total of both). Extra arguments go to criterion,
# e.g. `bench/pool.sh --measurement-time 10`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=(cargo)
command -v lcargo >/dev/null && build=(lcargo)
"${build[@]}" bench -p leaf-client --bench next_id -- "$@"
