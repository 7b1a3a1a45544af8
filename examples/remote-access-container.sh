#!/usr/bin/env bash
# Bring up (up) or tear down (down) a remote-access VPN on this machine:
# the gateway of remote-access.yaml in a container, a road warrior
# (strongSwan's charon) that logs in as alice with EAP-MSCHAPv2, and a
# server behind the gateway that the road warrior pings.
#
#   examples/remote-access-container.sh up [DIR]     (as root)
#   examples/remote-access-container.sh down [DIR]
#
# The gateway runs in the project's image (podman build -t
# localhost/ipsecd:dev . at the repository root; IMAGE names another) as
# the image's non-root user, with every capability dropped but
# CAP_NET_ADMIN and only /dev/net/tun as a device: no privileged
# container, no kernel ESP. Three network namespaces:
#
#   ipsecd-ra-client  192.0.2.2  charon, the road warrior (gets 10.3.0.1)
#        | veth
#   ipsecd-ra-gw      192.0.2.1  the container: ipsecd, TUN ipsec1 10.4.0.1
#        | veth
#   ipsecd-ra-lan     10.4.0.2   the server behind the gateway
#
# up writes into DIR (default: ra-container beside this script) the
# gateway's /etc/ipsecd (remote-access.yaml as ipsecd.yaml, a fresh
# self-signed certificate for vpn.example.net from genkeys.sh and a fresh
# password for alice, readable by the image's user only) and the client's
# charon configuration (the certificate as its trust anchor), starts the
# container and charon, connects, and pings 10.4.0.2 from the client.
# down stops charon and the container (SIGTERM: each deletes its SAs),
# deletes the namespaces and what up wrote in DIR.
#
# Needs root, podman, and strongSwan's charon and swanctl with the
# eap-mschapv2 plugin (Debian: strongswan-charon strongswan-swanctl
# libcharon-extauth-plugins libstrongswan-extra-plugins). PODMAN_FLAGS
# are global flags for podman (e.g. --runtime runc), PODMAN_RUN_FLAGS
# more flags for podman run (e.g. --ulimit); NS_CLIENT, NS_GW,
# NS_LAN and CONTAINER rename what up makes (the tests do, so as not to
# meet yours).
set -Eeuo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=remote-access-container.sh
image=${IMAGE:-localhost/ipsecd:dev}
ns_client=${NS_CLIENT:-ipsecd-ra-client}
ns_gw=${NS_GW:-ipsecd-ra-gw}
ns_lan=${NS_LAN:-ipsecd-ra-lan}
ctr=${CONTAINER:-ipsecd-ra-gw}
charon=/usr/lib/ipsec/charon
read -r -a podman_flags <<<"${PODMAN_FLAGS:-}"
read -r -a run_flags <<<"${PODMAN_RUN_FLAGS:-}"

die() {
	echo "$name: $*" >&2
	exit 1
}
usage() {
	echo "usage: $0 up|down [DIR]" >&2
	exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
verb=$1
dir=${2:-$here/ra-container}
case $verb in up | down) ;; *) usage ;; esac
[ "$(id -u)" = 0 ] || die "run as root: it makes network namespaces"
for tool in ip podman swanctl openssl nsenter; do
	command -v $tool >/dev/null || die "$tool is missing"
done
[ -x $charon ] || die "no charon at $charon (Debian: apt-get install strongswan-charon)"

pod() { podman "${podman_flags[@]}" "$@"; }
has_netns() { ip netns list | awk '{print $1}' | grep -qx "$1"; }
# client runs swanctl against the client's charon (its own /run).
client() {
	nsenter -t "$(cat "$dir/client/charon.pid")" -m -n env SWANCTL_DIR="$dir/client/swanctl" swanctl "$@"
}

down() {
	if [ -f "$dir/client/charon.pid" ]; then
		local pid
		pid=$(cat "$dir/client/charon.pid")
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	pod rm --force --time 5 "$ctr" >/dev/null 2>&1 || true
	for ns in "$ns_client" "$ns_gw" "$ns_lan"; do
		has_netns "$ns" && ip netns del "$ns"
	done
	# What up wrote, and DIR itself if that leaves it empty.
	rm -rf "$dir/etc-ipsecd" "$dir/client"
	rmdir "$dir" 2>/dev/null || true
	return 0
}

# gateway_etc writes the container's /etc/ipsecd.
gateway_etc() {
	local etc=$dir/etc-ipsecd
	mkdir -p "$etc/keys"
	cp "$here/remote-access.yaml" "$etc/ipsecd.yaml"
	"$here/genkeys.sh" "$etc" keys/gw.pem >/dev/null
	# A password alice could type: MSCHAPv2 hashes its text, so it is
	# text (hex digits, without the 0x that would make it bytes).
	(umask 077 && openssl rand -hex 12 >"$etc/keys/alice.secret")
	# The image's user (uid 65532) reads the keys, no one else.
	chown -R 65532:65532 "$etc/keys"
	chmod 600 "$etc/keys/gw.key" "$etc/keys/alice.secret"
	chmod 644 "$etc/ipsecd.yaml" "$etc/keys/gw.pem"
}

# client_conf writes charon's strongswan.conf and swanctl directory.
client_conf() {
	local c=$dir/client
	mkdir -p "$c/swanctl/x509ca"
	cp "$dir/etc-ipsecd/keys/gw.pem" "$c/swanctl/x509ca/"
	cat >"$c/strongswan.conf" <<EOF
charon {
  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey constraints curve25519 gcm aes sha2 sha1 md5 hmac kdf kernel-libipsec kernel-netlink socket-default vici eap-identity eap-mschapv2 resolve
  install_routes = yes
  # The DNS server the gateway names, here and not in /etc/resolv.conf.
  plugins {
    resolve {
      file = $c/resolv.conf
    }
  }
  filelog {
    log {
      path = $c/charon.log
      time_format = %T
      default = 1
      flush_line = yes
    }
  }
  syslog {
    daemon {
      default = -1
    }
  }
}
EOF
	# One setting a line: swanctl.conf's unquoted values run to the end of
	# the line.
	(umask 077 && cat >"$c/swanctl/swanctl.conf" <<EOF
connections {
  ra {
    version = 2
    remote_addrs = 192.0.2.1
    vips = 0.0.0.0
    proposals = aes256-sha256-x25519
    local {
      auth = eap-mschapv2
      eap_id = alice
    }
    remote {
      auth = pubkey
      id = vpn.example.net
    }
    children {
      ra {
        remote_ts = 10.4.0.0/24
        esp_proposals = aes128gcm16
      }
    }
  }
}
secrets {
  eap-alice {
    id = alice
    secret = "$(cat "$dir/etc-ipsecd/keys/alice.secret")"
  }
}
EOF
	)
}

make_namespaces() {
	for ns in "$ns_client" "$ns_gw" "$ns_lan"; do
		ip netns add "$ns"
		ip -n "$ns" link set lo up
	done
	ip -n "$ns_client" link add vc type veth peer name vg netns "$ns_gw"
	ip -n "$ns_client" addr add 192.0.2.2/24 dev vc
	ip -n "$ns_gw" addr add 192.0.2.1/24 dev vg
	ip -n "$ns_gw" link add vl type veth peer name vs netns "$ns_lan"
	ip -n "$ns_client" link set vc up
	ip -n "$ns_gw" link set vg up
	ip -n "$ns_gw" link set vl up
	ip -n "$ns_lan" link set vs up
	# The server: 10.4.0.2, reached from the gateway by a host route
	# (ipsec1 holds 10.4.0.0/24), its way back to the clients' pool
	# through the gateway's 10.4.0.1, which the gateway forwards.
	ip -n "$ns_lan" addr add 10.4.0.2/32 dev vs
	ip -n "$ns_lan" route add 10.4.0.1/32 dev vs
	ip -n "$ns_lan" route add 10.3.0.0/24 via 10.4.0.1 dev vs
	ip -n "$ns_gw" route add 10.4.0.2/32 dev vl
	ip netns exec "$ns_gw" sysctl -qw net.ipv4.ip_forward=1
	# IKE's port 500 for the image's non-root user, without
	# CAP_NET_BIND_SERVICE (a container with a network of its own gets
	# the same from podman run --sysctl).
	ip netns exec "$ns_gw" sysctl -qw net.ipv4.ip_unprivileged_port_start=500
}

start_gateway() {
	pod run --detach --name "$ctr" --network "ns:/run/netns/$ns_gw" \
		--cap-drop ALL --cap-add NET_ADMIN --device /dev/net/tun "${run_flags[@]}" \
		--volume "$dir/etc-ipsecd:/etc/ipsecd:ro" "$image" >/dev/null
	for _ in $(seq 100); do
		pod exec "$ctr" /ipsecd health --config /etc/ipsecd/ipsecd.yaml >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	echo "$name: the gateway did not answer in 20 s; its log:" >&2
	pod logs "$ctr" >&2
	return 1
}

start_client() {
	local c=$dir/client
	# charon in its own mount namespace, with a /run of its own (its
	# vici socket and pid file), in the client's network namespace.
	ip netns exec "$ns_client" unshare -m sh -c \
		"mount -t tmpfs tmpfs /run && exec env STRONGSWAN_CONF=$c/strongswan.conf $charon" \
		>"$c/charon.out" 2>&1 </dev/null &
	echo $! >"$c/charon.pid"
	for _ in $(seq 50); do
		client --stats >/dev/null 2>&1 && break
		sleep 0.1
	done
	client --load-all >/dev/null
}

up() {
	pod image exists "$image" || die "no image $image: build it at the repository root (podman build -t $image .)"
	for ns in "$ns_client" "$ns_gw" "$ns_lan"; do
		has_netns "$ns" && die "namespace $ns exists: run $0 down${2:+ $dir} first"
	done
	[ -e "$dir" ] && die "$dir exists: run $0 down${2:+ $dir} first"
	# Whatever fails half-way is undone.
	trap 'echo "$name: failed; undoing" >&2; down' ERR
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	gateway_etc
	client_conf
	make_namespaces
	echo "starting the gateway (container $ctr in $ns_gw) and charon (in $ns_client) ..."
	start_gateway
	start_client
	echo "alice connects with EAP-MSCHAPv2 ..."
	if ! client --initiate --child ra --timeout 30 >"$dir/client/initiate.out" 2>&1; then
		cat "$dir/client/initiate.out" >&2
		pod logs "$ctr" >&2
		false
	fi
	ip netns exec "$ns_client" ping -c 3 -i 0.2 -W 2 10.4.0.2
	trap - ERR
	cat <<EOT

Up: the gateway in container $ctr (namespace $ns_gw, 192.0.2.1), alice's
charon in $ns_client with the virtual IP below, the server 10.4.0.2 in
$ns_lan. Files (keys, configs, charon's log) in $dir.

$(ip -n "$ns_client" -br addr show dev ipsec0)

Try:
ip netns exec $ns_client ping -c 3 10.4.0.2
podman ${PODMAN_FLAGS:+$PODMAN_FLAGS }exec $ctr /ipsecd ike list --config /etc/ipsecd/ipsecd.yaml
podman ${PODMAN_FLAGS:+$PODMAN_FLAGS }exec $ctr /ipsecd pool list --leases --config /etc/ipsecd/ipsecd.yaml
podman ${PODMAN_FLAGS:+$PODMAN_FLAGS }logs $ctr

When done (stops both and removes it all):
$0 down${2:+ $dir}
EOT
}

case $verb in
up) up "$@" ;;
down) down ;;
esac
