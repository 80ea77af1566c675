#!/usr/bin/env bash
# Builds the leaf container image FROM scratch: a statically linked `leaf` (glibc, +crt-static)
# and nothing else. No base image is pulled, so it works without a registry.
#
#   deploy/build-image.sh [IMAGE]      default IMAGE: leaf:latest (or $LEAF_IMAGE)
#
# The static binary is built in its own target directory (target/x86_64-unknown-linux-gnu),
# so it does not disturb the normal build. Prints the image's name and size at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${1:-${LEAF_IMAGE:-leaf:latest}}"
TARGET=x86_64-unknown-linux-gnu
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET_DIR/$TARGET/release/leaf"

die() { echo "build-image: $*" >&2; exit 1; }
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine is not reachable (docker info failed)"

echo "build-image: compiling a static leaf for $TARGET (release)..." >&2
(cd "$ROOT" && RUSTFLAGS='-C target-feature=+crt-static' \
    cargo build --release --locked --quiet --target "$TARGET" -p leaf-node --bin leaf)

# A FROM scratch image has no dynamic loader: refuse a binary that needs one. (The headers are
# captured first: `readelf | grep -q` under pipefail can fail with SIGPIPE and skip the check.)
if command -v readelf >/dev/null; then
    headers="$(readelf -l "$BIN")"
    if grep -q 'Requesting program interpreter' <<<"$headers"; then
        die "$BIN is dynamically linked"
    fi
else
    echo "build-image: readelf not found; not checking that the binary is static" >&2
fi

CTX="$(mktemp -d)"
trap 'rm -rf "$CTX"' EXIT
# Debug info stays in the build tree (for backtraces there); the image gets a stripped copy.
if command -v strip >/dev/null; then strip -o "$CTX/leaf" "$BIN"; else cp "$BIN" "$CTX/leaf"; fi
chmod 0755 "$CTX/leaf"
# Empty directories, owned by the image's user in the image: data, certificates, the CA, and
# secrets made at setup (deploy/regions/: a region's token for its global tier).
mkdir "$CTX/data" "$CTX/tls"
mkdir -m 0700 "$CTX/ca" "$CTX/secrets"
cp "$ROOT/deploy/Dockerfile" "$CTX/Dockerfile"

REVISION="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
VERSION="$("$CTX/leaf" --version | awk '{print $2}')"
# The engine's legacy builder suffices for a FROM scratch image (no buildx needed); its
# output (a deprecation notice included) is shown only if the build fails.
if ! out="$(docker build \
    --label "org.opencontainers.image.title=leaf" \
    --label "org.opencontainers.image.version=$VERSION" \
    --label "org.opencontainers.image.revision=$REVISION" \
    -t "$IMAGE" "$CTX" 2>&1)"; then
    echo "$out" >&2
    die "docker build failed"
fi
SIZE="$(docker image inspect -f '{{.Size}}' "$IMAGE")"
echo "build-image: built $IMAGE (leaf $VERSION, revision $REVISION, $((SIZE / 1024 / 1024)) MiB)" >&2
echo "$IMAGE"
