#!/usr/bin/env bash
# Build the ipsecd container image (see Dockerfile) without pulling
# anything: a static binary (CGO_ENABLED=0) with cap_net_admin,cap_net_raw
# as permitted file capabilities, COPYed into FROM scratch.
#
#   scripts/image.sh [TAG]          default TAG: localhost/ipsecd:dev
#
# Environment: BUILDER=podman|docker (default podman, else docker).
# Run as root: setcap needs CAP_SETFCAP, and a rootless build would store
# the capability for the wrong user namespace.
#
# The build context is a temporary copy of what the image needs, so the
# working tree gets no dist/ directory and concurrent builds do not meet.
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
if ! command -v setcap >/dev/null; then
	echo "image.sh: setcap not found (Debian: apt-get install libcap2-bin)" >&2
	exit 1
fi

ctx=$(mktemp -d "${TMPDIR:-/tmp}/ipsecd-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/dist" "$ctx/deploy"
cp "$root/Dockerfile" "$root/.dockerignore" "$ctx/"
cp -a "$root/deploy/image" "$ctx/deploy/"

(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/dist/ipsecd" ./cmd/ipsecd)
if ! setcap cap_net_admin,cap_net_raw=p "$ctx/dist/ipsecd"; then
	echo "image.sh: setcap failed: run as root (the image's non-root daemon needs the file capabilities)" >&2
	exit 1
fi

# podman caches each step as an image of its own unless told not to: they
# would outlive the image (and nothing here is worth caching).
flags=()
[ "$builder" = podman ] && flags+=(--layers=false)
"$builder" build --quiet "${flags[@]}" -t "$tag" "$ctx" >/dev/null
size=$("$builder" image inspect --format '{{.Size}}' "$tag")
echo "$tag: $size bytes"
