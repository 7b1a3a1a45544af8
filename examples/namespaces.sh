# Sourced by two-namespaces.sh and ike-two-namespaces.sh: what both do to
# build and remove the pair of network namespaces the examples are written
# for. The caller sets here (this directory), repo (its parent), ns_a,
# ns_b and name (its own name, for messages), and defines usage.

die() {
	echo "$name: $*" >&2
	exit 1
}

# check_host fails unless run as root with the ip command.
check_host() {
	[ "$(id -u)" = 0 ] || die "run as root: it makes network namespaces"
	command -v ip >/dev/null || die "the ip command is missing (Debian: apt-get install iproute2)"
}

# find_ipsecd sets ipsecd to the binary: $IPSECD, else ipsecd on PATH,
# else ./ipsecd at the repository root.
find_ipsecd() {
	ipsecd=${IPSECD:-}
	if [ -z "$ipsecd" ]; then
		if command -v ipsecd >/dev/null; then
			ipsecd=$(command -v ipsecd)
		else
			ipsecd=$repo/ipsecd
		fi
	fi
}

# control prints the control socket a config names.
control() {
	sed -n 's/^control:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$1"
}

has_netns() {
	ip netns list | awk '{print $1}' | grep -qx "$1"
}

# refuse_existing fails when either namespace is already there; ARGS are
# what to pass to "$0 down" to remove it.
refuse_existing() {
	for ns in "$ns_a" "$ns_b"; do
		has_netns "$ns" && die "namespace $ns exists: run $0 down${1:+ $1} first"
	done
	return 0
}

# remove_namespaces stops the daemons in both namespaces (SIGTERM, on
# which ipsecd deletes its SAs and stops cleanly, then SIGKILL after 5 s)
# and deletes the namespaces, and so the veth pair.
remove_namespaces() {
	local ns pids
	for ns in "$ns_a" "$ns_b"; do
		has_netns "$ns" || continue
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
}

# remove_configs removes the control sockets the configs name, and the
# configs themselves when they are copies in a directory of the user's.
remove_configs() {
	local cfg sock
	for cfg in "$@"; do
		[ -f "$dir/$cfg" ] || continue
		sock=$(control "$dir/$cfg")
		[ -n "$sock" ] && rm -f "$sock"
		[ "$dir" != "$here" ] && rm -f "$dir/$cfg"
	done
	return 0
}

# make_namespaces makes both namespaces joined by a veth pair: veth-a
# 192.0.2.1/24 in A, veth-b 192.0.2.2/24 in B, every link up.
make_namespaces() {
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
}
