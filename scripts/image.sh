#!/usr/bin/env bash
# Build the ipsecd container image: `podman build` (or docker build) of the
# repository's Dockerfile, with the version and VCS revision as labels.
#
#   scripts/image.sh [TAG]          default TAG: localhost/ipsecd:dev
#
# Environment: BUILDER=podman|docker (default podman, else docker);
# GO_IMAGE, the Go image of the build stage (default the Dockerfile's, the
# official golang image); GOPROXY, the module proxy (default go env GOPROXY
# when go is installed, else Go's default).
# Run as root: the build stage gives the binary file capabilities, and a
# rootless build would store them for the wrong user namespace.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-localhost/ipsecd:dev}

builder=${BUILDER:-}
if [ -z "$builder" ]; then
	if command -v podman >/dev/null; then builder=podman; elif command -v docker >/dev/null; then builder=docker; fi
fi
if [ -z "$builder" ] || ! command -v "$builder" >/dev/null; then
	echo "image.sh: no podman or docker found (Debian: apt-get install podman runc)" >&2
	exit 1
fi

args=(--build-arg "VERSION=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)"
	--build-arg "REVISION=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)")
[ -n "${GO_IMAGE:-}" ] && args+=(--build-arg "GO_IMAGE=$GO_IMAGE")
proxy=${GOPROXY:-$(command -v go >/dev/null && go env GOPROXY || true)}
[ -n "$proxy" ] && args+=(--build-arg "GOPROXY=$proxy")
# podman keeps HEALTHCHECK only in the Docker format, and would keep every
# step as an image of its own: they would outlive the image.
[ "$builder" = podman ] && args+=(--format docker --layers=false)
"$builder" build --quiet "${args[@]}" -t "$tag" "$root" >/dev/null
size=$("$builder" image inspect --format '{{.Size}}' "$tag")
echo "$tag: $size bytes"
