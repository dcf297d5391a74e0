#!/usr/bin/env bash
# Builds the images localhost/forgived, localhost/trimswitch and
# localhost/forgivectl with buildah, without a registry: each is its
# static binary (CGO_ENABLED=0) on an empty base, from
# BINARY.scratch.Containerfile (docs/cluster.md, "Images"). Run from
# anywhere in the repository:
#
#   deploy/container/build-images.sh [TAG]       # TAG: default latest
#
# BUILDAH_GLOBAL holds buildah's global flags, to build into a storage of
# one's own, e.g. BUILDAH_GLOBAL="--root /tmp/s --runroot /tmp/r".
# podman sees the images in the same storage (podman --root ... run).
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-latest}
# shellcheck disable=SC2206 # the global flags are words
global=(${BUILDAH_GLOBAL:-})
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
for b in forgived trimswitch forgivectl; do
  mkdir -p "$ctx/$b"
done
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/bin/" ./cmd/forgived ./cmd/trimswitch ./cmd/forgivectl
for b in forgived trimswitch forgivectl; do
  cp "$ctx/bin/$b" "$ctx/$b/$b"
  buildah "${global[@]}" bud --quiet --format oci --layers=false \
    -f "deploy/container/$b.scratch.Containerfile" -t "localhost/$b:$tag" "$ctx/$b" >/dev/null
  echo "localhost/$b:$tag"
done
