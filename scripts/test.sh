#!/usr/bin/env bash
# The whole test suite: vet, unit and namespace tests (root), race tests of
# the concurrent packages, and every fuzz target for a few seconds.
# Run as root so the TUN and network-namespace tests run instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-5s}

# Every external command the tests run, as COMMAND:PACKAGE (the Debian
# package that brings it). internal/testdeps fails when a test
# runs a command that is not listed here, and the check after the install
# fails when a listed command is missing, so a fresh machine cannot lack
# one unnoticed. ip (iproute2) makes namespaces and veth pairs; ping
# crosses the tunnel; nft (nftables) drops underlay packets in
# TestBadTraffic; tcpdump captures prove nothing leaves in clear; iperf3,
# wg and wireguard-go serve the benchmark's tests; podman and runc build
# and run the container image (crun, podman's default runtime, fails
# here), from the files git ls-files lists (git), as a clone holds them;
# setcap (libcap2-bin) checks internal/cmd/setfcap against the real thing;
# systemd-analyze (systemd) verifies deploy/systemd/ipsecd.service and
# setpriv (util-linux) runs the daemon with the unit's privileges;
# sysctl and kill (procps) tune and clean up namespaces, pgrep (procps)
# checks that the container gateway's script left no process behind; ss (iproute2)
# watches the benchmark's sockets; timeout (coreutils) bounds a capture;
# swanctl (strongswan-swanctl) drives strongSwan's charon, the IKEv2 peer
# of ike's interop test, run inside charon's namespaces with nsenter and
# unshare (util-linux); tshark decrypts the capture with ike's keylog lines;
# conntrack flushes the test NAT's mappings (TestIKENAT's mapping change);
# debootstrap builds the Debian sid chroot whose strongSwan 6 is the
# post-quantum peer (scripts/sid-strongswan.sh, below), whose charon and
# swanctl run under chroot (coreutils) with their mounts (mount);
# freeradius is the AAA server eapradius relays EAP to and reports
# accounting to (internal/radiustest runs it with a config of its own;
# its SQL address pool is rlm_sqlippool on rlm_sql_sqlite, both in the
# package, with a database sqlite3 makes);
# python3's plistlib reads back the Apple profiles ipsecd profile writes;
# openssl makes the remote-access example's gateway certificate in
# examples/genkeys.sh, which the example tests run; sh (dash) and sleep
# pause a process and its helper in integration's TestAwaitRunningStall.
testcmds="ip:iproute2 ping:iputils-ping nft:nftables tcpdump:tcpdump iperf3:iperf3 wg:wireguard-tools
podman:podman runc:runc git:git setcap:libcap2-bin systemd-analyze:systemd setpriv:util-linux sysctl:procps kill:procps pgrep:procps bash:bash ss:iproute2 timeout:coreutils
swanctl:strongswan-swanctl nsenter:util-linux unshare:util-linux tshark:tshark conntrack:conntrack
debootstrap:debootstrap chroot:coreutils mount:mount freeradius:freeradius sqlite3:sqlite3 python3:python3 openssl:openssl sh:dash sleep:coreutils"
# Packages without a command of their own: scapy (the independent ESP
# implementation, run with /usr/bin/python3) and the cryptography module
# its ESP layer uses; strongSwan's charon (/usr/lib/ipsec/charon, not on
# PATH) with the plugins the interop test loads beyond libstrongswan's own:
# openssl and gcm (standard), curve25519 and chapoly (extra),
# kernel-libipsec, eap-identity and eap-md5 (charon extra), eap-mschapv2
# (charon extauth: the road warrior of the remote-access tests); vici comes
# with strongswan-swanctl.
pkgs="python3-scapy python3-cryptography strongswan-charon libstrongswan-standard-plugins libstrongswan-extra-plugins libcharon-extra-plugins libcharon-extauth-plugins $(for c in $testcmds; do echo "${c#*:}"; done | sort -u)"
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
if [ "$(id -u)" = 0 ]; then
	absent=""
	for c in $testcmds; do
		command -v "${c%%:*}" >/dev/null || absent="$absent ${c%%:*} (package ${c#*:})"
	done
	/usr/bin/python3 -c 'import scapy.all, cryptography' 2>/dev/null || absent="$absent /usr/bin/python3 with scapy (python3-scapy, python3-cryptography)"
	[ -x /usr/lib/ipsec/charon ] || absent="$absent /usr/lib/ipsec/charon (strongswan-charon)"
	[ -e /usr/lib/ipsec/plugins/libstrongswan-eap-mschapv2.so ] || absent="$absent charon's eap-mschapv2 plugin (libcharon-extauth-plugins)"
	# strongSwan 6.1 with ML-KEM, the post-quantum interop peer: Debian
	# 12 has none, so a sid chroot (about 250 MB, under a minute; kept
	# and refreshed on later runs).
	echo "== strongSwan 6 chroot (scripts/sid-strongswan.sh)"
	scripts/sid-strongswan.sh install || absent="$absent the strongSwan 6 chroot (scripts/sid-strongswan.sh install)"
	if [ -n "$absent" ]; then
		echo "error: the tests run commands that are still missing after the install:$absent" >&2
		exit 1
	fi
fi

echo "== go vet"
go vet ./...

echo "== go test"
go test -count=1 -timeout 30m ./...

echo "== go test -race (data plane, state directory, control socket, the daemon, the IKE loop and the RADIUS client)"
go test -count=1 -race -timeout 15m ./sa/... ./xfrmif/... ./underlay/... ./datapath/... ./seqstate/... ./control/... ./daemon/... ./ikenode/... ./eapradius/...
# The sidecar's endpoint meets netstack's goroutines and the datapath's
# workers; -short keeps the traffic matrix small (gVisor under -race is slow).
go test -count=1 -race -short -timeout 15m ./stack/...

echo "== fuzz (${fuzztime} each)"
# Every FuzzXxx target in the module, run one at a time as go test requires.
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "-- $pkg $target"
		# A bare "context deadline exceeded" with no failing input written
		# is Go's fuzzing coordinator racing its own -fuzztime deadline
		# on a loaded machine (golang/go#75804), not a finding: run the
		# target once more. A real finding writes "Failing input written
		# to testdata/fuzz/..." and fails at once.
		for try in 1 2; do
			if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/ipsecd-fuzz.log 2>&1; then
				break
			fi
			if [ "$try" = 1 ] && grep -q 'context deadline exceeded' /tmp/ipsecd-fuzz.log &&
				! grep -q -e 'Failing input written' -e 'panic:' -e '_test.go:[0-9]*:' /tmp/ipsecd-fuzz.log; then
				echo "   (the fuzzing coordinator's deadline race, no finding: once more)"
				continue
			fi
			cat /tmp/ipsecd-fuzz.log
			exit 1
		done
	done
done
echo "== all tests passed"
