#!/usr/bin/env bash
# Bring up (up) or tear down (down) an IKEv2 tunnel between two network
# namespaces on this machine: the hosts that ike-a.yaml and ike-b.yaml are
# written for, each running ipsecd, which negotiate their keys with a
# pre-shared key.
#
#   examples/ike-two-namespaces.sh up [DIR]     (as root)
#   examples/ike-two-namespaces.sh down [DIR]
#
# up makes namespaces ipsecd-ike-a and ipsecd-ike-b joined by a veth pair,
# veth-a 192.0.2.1/24 in A and veth-b 192.0.2.2/24 in B (the examples'
# underlay addresses), writes a fresh random pre-shared key to
# DIR/keys/ike.psk (mode 0600, with genkeys.sh), starts `ipsecd run` in
# each namespace (B, which answers, then A, which initiates), waits until
# both list the IKE SA with its child installed, and prints `ipsecd ike
# list` and the commands to try. DIR is where the configs are: this
# directory by default, else a directory of yours, which gets copies of
# ike-a.yaml and ike-b.yaml (their secret_file and state_dir are
# relative). The daemons log to DIR/ike-a.log and DIR/ike-b.log. down
# stops the daemons (SIGTERM: each deletes its IKE SA with the peer),
# deletes the namespaces (and so the veth pair), and removes the key, the
# logs, the state directories, the copied configs and the daemons'
# sockets.
#
# The ipsecd binary is $IPSECD, else ipsecd on PATH, else ./ipsecd at the
# repository root (go build -o ipsecd ./cmd/ipsecd). NS_A and NS_B rename
# the namespaces (the tests do, so as not to meet yours).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
ns_a=${NS_A:-ipsecd-ike-a}
ns_b=${NS_B:-ipsecd-ike-b}
psk=keys/ike.psk

name=ike-two-namespaces.sh
. "$here/namespaces.sh"

usage() {
	echo "usage: $0 up|down [DIR]" >&2
	exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
verb=$1
dir=${2:-$here}
case $verb in up | down) ;; *) usage ;; esac
check_host
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
find_ipsecd

down() {
	remove_namespaces
	remove_configs ike-a.yaml ike-b.yaml
	rm -f "$dir/$psk" "$dir/ike-a.log" "$dir/ike-b.log"
	rmdir "$dir/keys" 2>/dev/null || true
	rm -rf "$dir/state/ike-a" "$dir/state/ike-b"
	rmdir "$dir/state" 2>/dev/null || true
	[ "$dir" != "$here" ] && { rmdir "$dir" 2>/dev/null || true; }
	return 0
}

# start NS CONFIG LOG starts ipsecd run in NS and waits up to 20 s for its
# control socket to answer.
start() {
	ip netns exec "$1" "$ipsecd" run --config "$2" >"$3" 2>&1 </dev/null &
	local pid=$!
	for _ in $(seq 200); do
		"$ipsecd" health --config "$2" --timeout 1s >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "ike-two-namespaces.sh: ipsecd in $1 did not answer (it ran: $ipsecd run --config $2); its log ($3):" >&2
	cat "$3" >&2
	return 1
}

# established CONFIG: the daemon lists an established IKE SA whose child is
# installed.
established() {
	local list
	list=$("$ipsecd" ike list --config "$1" 2>/dev/null) || return 1
	grep -q ': ESTABLISHED, IKEv2' <<<"$list" && grep -q ': INSTALLED, ' <<<"$list"
}

up() {
	[ -x "$ipsecd" ] || die "no ipsecd binary at $ipsecd: build it first (go build -o ipsecd ./cmd/ipsecd) or set IPSECD"
	refuse_existing "${2:+$dir}"
	# Whatever fails half-way is undone.
	trap 'echo "ike-two-namespaces.sh: failed; undoing" >&2; down' ERR
	if [ "$dir" != "$here" ]; then
		cp "$here/ike-a.yaml" "$here/ike-b.yaml" "$dir/"
	fi
	IPSECD=$ipsecd "$here/genkeys.sh" "$dir" "$psk" >/dev/null

	make_namespaces

	# B answers, so it runs first; A initiates as it starts.
	echo "starting ipsecd in $ns_b (answers) and in $ns_a (initiates) ..."
	start "$ns_b" "$dir/ike-b.yaml" "$dir/ike-b.log"
	start "$ns_a" "$dir/ike-a.yaml" "$dir/ike-a.log"
	echo "waiting for the IKE SA and its child ..."
	for _ in $(seq 200); do
		established "$dir/ike-a.yaml" && established "$dir/ike-b.yaml" && break
		sleep 0.1
	done
	if ! established "$dir/ike-a.yaml" || ! established "$dir/ike-b.yaml"; then
		echo "ike-two-namespaces.sh: no IKE SA with an installed child within 20 s; the logs:" >&2
		cat "$dir/ike-a.log" "$dir/ike-b.log" >&2
		false
	fi
	trap - ERR

	echo
	"$ipsecd" ike list --config "$dir/ike-a.yaml"
	cat <<EOT

Up: namespace $ns_a (veth-a 192.0.2.1/24) and $ns_b (veth-b 192.0.2.2/24),
a fresh pre-shared key in $dir/$psk (mode 0600), ipsecd running in
each (logs: $dir/ike-a.log, $dir/ike-b.log), the IKE SA established.

Through the tunnel (10.10.0.1 is A's ipsec1, 10.20.0.1 B's):
ip netns exec $ns_a ping -c 3 10.20.0.1
ip netns exec $ns_b ping -c 3 10.10.0.1

What IKE negotiated, and new keys on demand:
$ipsecd ike list --config $dir/ike-a.yaml
$ipsecd ike rekey --child net --config $dir/ike-a.yaml
$ipsecd ike rekey --ike site-b --config $dir/ike-a.yaml
$ipsecd stats --config $dir/ike-b.yaml

When done (stops both daemons and removes it all):
$0 down${2:+ $dir}
EOT
}

case $verb in
up) up "$@" ;;
down) down ;;
esac
