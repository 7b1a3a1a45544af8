#!/usr/bin/env bash
# sid-strongswan.sh: a Debian sid chroot whose strongSwan (6.1 or later,
# ML-KEM through OpenSSL >= 3.5) is ike's post-quantum interop peer.
# Debian 12's strongSwan 5.9.8 knows neither ML-KEM nor RFC 9370's
# additional key exchanges; sid's does. scripts/test.sh calls
# "install"; the tests (internal/charontest) start charon from the
# chroot themselves. Needs root.
#
#   sid-strongswan.sh install [DIR]   build or refresh DIR (default
#                                     $SID_SWAN_ROOT or /opt/sid-swan);
#                                     prints the strongSwan version
#
# The Debian mirror is the host's apt mirror (SID_SWAN_MIRROR overrides).
set -euo pipefail
[ "${1:-}" = install ] || { sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 2; }
dir=${2:-${SID_SWAN_ROOT:-/opt/sid-swan}}
pkgs="strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-extra-plugins libstrongswan-standard-plugins"

fail() { echo "sid-strongswan.sh: $*" >&2; exit 1; }

# quiet runs a command with its output shown only when it fails.
quiet() {
	local log
	log=$(mktemp)
	if ! "$@" >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		fail "failed: $*"
	fi
	rm -f "$log"
}
[ "$(id -u)" = 0 ] || fail "needs root"

# The first Debian archive among the host's apt sources (not -security).
mirror() {
	if [ -n "${SID_SWAN_MIRROR:-}" ]; then echo "$SID_SWAN_MIRROR"; return; fi
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -v '^[[:space:]]*#' | grep -oE 'https?://[^[:space:]]+' | grep -E '/debian/?$' | head -n1 || true
}

if ! command -v debootstrap >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
# debootstrap removes DIR/debootstrap when done: while it is there, the
# chroot is unfinished and is made again.
if [ ! -x "$dir/usr/bin/apt-get" ] || [ -d "$dir/debootstrap" ]; then
	m=$(mirror)
	[ -n "$m" ] || fail "no Debian mirror in the apt sources; set SID_SWAN_MIRROR"
	quiet debootstrap --variant=minbase sid "$dir" "$m"
fi
# Nothing is started inside the chroot by a package's install.
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
chmod 755 "$dir/usr/sbin/policy-rc.d"
# A mirror may serve a sid frozen in the past: its Release is "expired".
echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99sid-swan"
installed=$(chroot "$dir" dpkg-query -W -f='${db:Status-Status}\n' $pkgs 2>/dev/null | grep -c '^installed$' || true)
if [ "$installed" -ne "$(echo $pkgs | wc -w)" ]; then
	quiet chroot "$dir" env LC_ALL=C DEBIAN_FRONTEND=noninteractive sh -c \
		"apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs && apt-get clean"
fi
chroot "$dir" dpkg-query -W -f='${Package} ${Version}\n' strongswan-charon libssl3t64
