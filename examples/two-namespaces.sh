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

name=two-namespaces.sh
. "$here/namespaces.sh"

usage() {
	echo "usage: $0 up|down [DIR]" >&2
	exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
verb=$1
dir=${2:-$here}
check_host
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
find_ipsecd

down() {
	remove_namespaces
	remove_configs host-a.yaml host-b.yaml
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
	refuse_existing "${2:+$dir}"
	# Whatever fails half-way is undone.
	trap 'echo "two-namespaces.sh: failed; undoing" >&2; down' ERR
	if [ "$dir" != "$here" ]; then
		cp "$here/host-a.yaml" "$here/host-b.yaml" "$dir/"
	fi
	IPSECD=${IPSECD:-} "$here/genkeys.sh" "$dir" "${pair_keys[@]}" >/dev/null

	make_namespaces
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
