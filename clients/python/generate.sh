#!/usr/bin/env bash
# Regenerates the gRPC stubs of leaf_client from api/proto/leaf/v1/leaf.proto.
#
#   clients/python/generate.sh [OUT_DIR]   (default: clients/python/leaf_client/_proto)
#
# Needs grpcio-tools (pip install grpcio-tools==1.85.1). protoc writes modules that import each
# other as the top-level package `leaf.v1`; inside leaf_client they live in the subpackage
# `leaf_client._proto`, so the one absolute import `from leaf.v1 import leaf_pb2` of the service
# stub is rewritten to the relative `from . import leaf_pb2`. The contract test
# tests/test_contract.py runs this script into a temporary directory and fails when the
# committed stubs differ.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$HERE/leaf_client/_proto}"
PYTHON="${PYTHON:-python3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$PYTHON" -m grpc_tools.protoc -I "$ROOT/api/proto" \
    --python_out="$TMP" --grpc_python_out="$TMP" --pyi_out="$TMP" leaf/v1/leaf.proto
mkdir -p "$OUT"
for f in leaf_pb2.py leaf_pb2.pyi leaf_pb2_grpc.py; do
    sed -e 's/^from leaf\.v1 import leaf_pb2 as /from . import leaf_pb2 as /' "$TMP/leaf/v1/$f" > "$OUT/$f"
done
[[ -f "$OUT/__init__.py" ]] || printf '"""Generated gRPC stubs of leaf.v1 (see clients/python/generate.sh)."""\n' > "$OUT/__init__.py"
