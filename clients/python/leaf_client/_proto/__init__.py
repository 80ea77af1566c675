"""Generated gRPC stubs of leaf.v1 (see clients/python/generate.sh)."""
