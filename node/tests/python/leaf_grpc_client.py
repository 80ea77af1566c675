"""A Python gRPC client of a leaf node, from stubs generated out of the committed protos.

Usage: leaf_grpc_client.py STUBS_DIR HOST:PORT TAG

STUBS_DIR holds what `python3 -m grpc_tools.protoc -I api/proto --python_out=STUBS_DIR
--grpc_python_out=STUBS_DIR leaf/v1/leaf.proto grpc/health/v1/health.proto` wrote. Gets segment
ranges (count 1000, twice), snowflake ranges (count 100) and a decode over h2c and prints one
JSON object on stdout, which node/tests/node/grpc_python.rs checks. A failed call prints its
gRPC code and the `leaf-code` metadata too (the unknown tag below).
"""
import json
import sys

stubs, target, tag = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, stubs)

import grpc  # noqa: E402
from leaf.v1 import leaf_pb2, leaf_pb2_grpc  # noqa: E402


def ranges(answer):
    return [[r.start, r.end] for r in answer.ranges]


with grpc.insecure_channel(target) as channel:
    ids = leaf_pb2_grpc.IdServiceStub(channel)
    out = {
        "segment": [
            ranges(ids.GetSegmentIds(leaf_pb2.GetSegmentIdsRequest(tag=tag, count=1000), timeout=30))
            for _ in range(2)
        ],
    }
    flakes = ids.GetSnowflakeIds(leaf_pb2.GetSnowflakeIdsRequest(key="python", count=100), timeout=30)
    out["snowflake"] = ranges(flakes)
    parts = ids.DecodeSnowflake(leaf_pb2.DecodeSnowflakeRequest(id=flakes.ranges[0].start), timeout=30)
    out["decode"] = {
        "id": parts.id,
        "timestamp_ms": parts.timestamp_ms,
        "timestamp": parts.timestamp,
        "worker_id": parts.worker_id,
        "sequence": parts.sequence,
    }
    try:
        ids.GetSegmentIds(leaf_pb2.GetSegmentIdsRequest(tag="python-no-such-tag", count=1), timeout=30)
        out["unknown_tag"] = None
    except grpc.RpcError as e:
        meta = dict(e.trailing_metadata() or ())
        out["unknown_tag"] = {"code": e.code().name, "leaf_code": meta.get("leaf-code")}

print(json.dumps(out))
