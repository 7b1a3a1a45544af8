#!/usr/bin/env bash
# The whole test suite: vet, unit and namespace tests (root), race tests of
# the concurrent packages, and every fuzz target for a few seconds.
# Run as root so the TUN and network-namespace tests run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5s}

echo "== go vet"
go vet ./...

echo "== go test"
go test -count=1 -timeout 30m ./...

echo "== go test -race (data plane packages)"
go test -count=1 -race -timeout 15m ./sa/... ./xfrmif/... ./underlay/...

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
