#!/usr/bin/env bash
# Build (up) or remove (down) the two hosts the tunnel-mode examples
# host-a.yaml and host-b.yaml are written for, as two network namespaces on
# this machine, and print the commands that run ipsecd on each.
#
#   examples/two-namespaces.sh up [DIR]     (as root)
#   examples/two-namespaces.sh down [DIR]
#
# up makes namespaces ipsecd-a and ipsecd-b joined by a veth pair, veth-a
# 192.0.2.1/24 in A and veth-b 192.0.2.2/24 in B (the examples' underlay
# addresses), and fresh keys for the pair with `ipsecd genkey` in
# DIR/keys, mode 0600 (genkeys.sh). DIR is where the configs are: this
# directory by default, else a directory of yours, which gets copies of
# host-a.yaml and host-b.yaml (their key_file paths are relative). down
# stops what runs in the namespaces, deletes them (and so the veth pair),
# and removes the keys with their sequence records (state/, see the
# configs' state_dir), the copied configs and the daemons' sockets.
#
# The ipsecd binary in the printed commands is $IPSECD, else ipsecd on
# PATH, else ./ipsecd at the repository root (go build -o ipsecd
# ./cmd/ipsecd). NS_A and NS_B rename the namespaces (the tests do, so as
# not to meet yours).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
ns_a=${NS_A:-ipsecd-a}
ns_b=${NS_B:-ipsecd-b}
pair_keys=(keys/a-to-b.key keys/b-to-a.key)

usage() {
	echo "usage: $0 up|down [DIR]" >&2
	exit 2
}
die() {
	echo "two-namespaces.sh: $*" >&2
	exit 1
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
verb=$1
dir=${2:-$here}
[ "$(id -u)" = 0 ] || die "run as root: it makes network namespaces"
command -v ip >/dev/null || die "the ip command is missing (Debian: apt-get install iproute2)"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

ipsecd=${IPSECD:-}
if [ -z "$ipsecd" ]; then
	if command -v ipsecd >/dev/null; then
		ipsecd=$(command -v ipsecd)
	else
		ipsecd=$repo/ipsecd
	fi
fi

# control prints the control socket a config names.
control() {
	sed -n 's/^control:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$1"
}

has_netns() {
	ip netns list | awk '{print $1}' | grep -qx "$1"
}

down() {
	for ns in "$ns_a" "$ns_b"; do
		has_netns "$ns" || continue
		# The daemons started in the namespace: SIGTERM, as ipsecd
		# stops cleanly on it, then SIGKILL after 5 s.
		pids=$(ip netns pids "$ns")
		if [ -n "$pids" ]; then
			kill -TERM $pids 2>/dev/null || true
			for _ in $(seq 50); do
				pids=$(ip netns pids "$ns")
				[ -z "$pids" ] && break
				sleep 0.1
			done
			[ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
		fi
		ip netns del "$ns"
	done
	for cfg in host-a.yaml host-b.yaml; do
		[ -f "$dir/$cfg" ] || continue
		sock=$(control "$dir/$cfg")
		[ -n "$sock" ] && rm -f "$sock"
		[ "$dir" != "$here" ] && rm -f "$dir/$cfg"
	done
	for k in "${pair_keys[@]}"; do
		rm -f "$dir/$k"
	done
	rmdir "$dir/keys" 2>/dev/null || true
	# The keys are gone, so their sequence records protect nothing.
	rm -rf "$dir/state/host-a" "$dir/state/host-b"
	rmdir "$dir/state" 2>/dev/null || true
	[ "$dir" != "$here" ] && { rmdir "$dir" 2>/dev/null || true; }
	return 0
}

up() {
	for ns in "$ns_a" "$ns_b"; do
		has_netns "$ns" && die "namespace $ns exists: run $0 down${2:+ $dir} first"
	done
	# Whatever fails half-way is undone.
	trap 'echo "two-namespaces.sh: failed; undoing" >&2; down' ERR
	if [ "$dir" != "$here" ]; then
		cp "$here/host-a.yaml" "$here/host-b.yaml" "$dir/"
	fi
	IPSECD=${IPSECD:-} "$here/genkeys.sh" "$dir" "${pair_keys[@]}" >/dev/null

	ip netns add "$ns_a"
	ip netns add "$ns_b"
	ip -n "$ns_a" link add veth-a type veth peer name veth-b netns "$ns_b"
	ip -n "$ns_a" addr add 192.0.2.1/24 dev veth-a
	ip -n "$ns_b" addr add 192.0.2.2/24 dev veth-b
	for ns in "$ns_a" "$ns_b"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$ns_a" link set veth-a up
	ip -n "$ns_b" link set veth-b up
	trap - ERR

	cat <<EOT
Up: namespace $ns_a (veth-a 192.0.2.1/24) and $ns_b (veth-b 192.0.2.2/24),
fresh keys in $dir/keys (mode 0600).

Host A, in one terminal:
ip netns exec $ns_a $ipsecd run --config $dir/host-a.yaml

Host B, in another:
ip netns exec $ns_b $ipsecd run --config $dir/host-b.yaml

Then through the tunnel (10.10.0.1 is A's ipsec1, 10.20.0.1 B's):
ip netns exec $ns_a ping -c 3 10.20.0.1
ip netns exec $ns_b ping -c 3 10.10.0.1
$ipsecd state list --config $dir/host-a.yaml

When done (stops both daemons and removes it all):
$0 down${2:+ $dir}
EOT
	[ -x "$ipsecd" ] || echo "(build $ipsecd first: go build -o ipsecd ./cmd/ipsecd)"
}

case $verb in
up) up "$@" ;;
down) down ;;
*) usage ;;
esac
