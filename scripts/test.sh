#!/usr/bin/env bash
# The whole test suite: vet, unit and namespace tests (root), race tests of
# the concurrent packages, and every fuzz target for a few seconds.
# Run as root so the TUN and network-namespace tests run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5s}

# Debian packages the tests use, installed when missing (as root):
# iproute2 for namespaces and veth, iputils-ping for ping across the tunnel,
# python3-scapy for the independent ESP implementation, tcpdump for the
# captures that prove nothing leaves in clear, iperf3 and wireguard-tools
# for the benchmark's config tests; podman and runc to build and run the
# container image (integration/container_test.go; crun, podman's default
# runtime, fails here), libcap2-bin for the setcap of scripts/image.sh.
pkgs="iproute2 iputils-ping python3-scapy python3-cryptography tcpdump iperf3 wireguard-tools podman runc libcap2-bin"
missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "== installing" $missing
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends $missing >/dev/null
	else
		echo "warning: not root, cannot install:" $missing "(the tests that need them skip without root anyway)"
	fi
fi

echo "== go vet"
go vet ./...

echo "== go test"
go test -count=1 -timeout 30m ./...

echo "== go test -race (data plane packages)"
go test -count=1 -race -timeout 15m ./sa/... ./xfrmif/... ./underlay/... ./datapath/...
# The sidecar's endpoint meets netstack's goroutines and the datapath's
# workers; -short keeps the traffic matrix small (gVisor under -race is slow).
go test -count=1 -race -short -timeout 15m ./stack/...

echo "== fuzz (${fuzztime} each)"
# Every FuzzXxx target in the module, run one at a time as go test requires.
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "-- $pkg $target"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/ipsecd-fuzz.log 2>&1 || {
			cat /tmp/ipsecd-fuzz.log
			exit 1
		}
	done
done
echo "== all tests passed"
