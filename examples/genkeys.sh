#!/usr/bin/env bash
# Make fresh keys for the example configs: each key file the examples name
# (key_file:, secret_file:), written by `ipsecd genkey` with mode 0600, and
# the remote-access example's gateway certificate (openssl), which
# roadwarrior/roadwarrior.yaml trusts as its CA (logging in to that gateway
# with the same keys/alice.secret). The examples hold no keys of their own,
# so that no published key ends up in a real tunnel and `ipsecd check` has
# nothing to warn about.
#
#   examples/genkeys.sh [DIR [FILE...]]
#
# DIR is the directory the configs are in (default: this one); FILE, a key
# file relative to it (default: all of them). An existing file is
# replaced. The binary is $IPSECD, else ipsecd on PATH, else ./ipsecd at
# the repository root, else `go run ./cmd/ipsecd`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

# FILE ALGORITHM: every key file the examples name, with the algorithm of
# the key (the default key size, e.g. AES-128 for rfc4106(gcm(aes))), or
# "password" for a user's EAP password: text a person can type into a
# phone's VPN settings (EAP-MSCHAPv2 hashes the password as text, so a
# 0x-hex key would be a string of bytes nobody can enter).
keys="keys/a-to-b.key:rfc4106(gcm(aes))
keys/b-to-a.key:rfc4106(gcm(aes))
keys/transport-out-enc.key:cbc(aes)
keys/transport-out-auth.key:hmac(sha256)
keys/transport-in.key:rfc7539esp(chacha20,poly1305)
keys/site-b.psk:hmac(sha256)
keys/ike.psk:hmac(sha256)
keys/aws-tunnel1.psk:hmac(sha256)
keys/gcp.psk:hmac(sha256)
keys/azure.psk:hmac(sha256)
keys/alice.secret:password
roadwarrior/keys/alice.psk:hmac(sha256)
sidecar/keys/server-to-client.key:rfc4106(gcm(aes))
sidecar/keys/client-to-server.key:rfc4106(gcm(aes))"

dir=${1:-$here}
shift || true

ipsecd=()
if [ -n "${IPSECD:-}" ]; then
	ipsecd=("$IPSECD")
elif command -v ipsecd >/dev/null; then
	ipsecd=(ipsecd)
elif [ -x "$repo/ipsecd" ]; then
	ipsecd=("$repo/ipsecd")
else
	ipsecd=(go -C "$repo" run ./cmd/ipsecd)
fi

want=("$@")
made=0
umask 077
while IFS=: read -r file alg; do
	if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $file "* ]]; then
		continue
	fi
	mkdir -p "$dir/$(dirname "$file")"
	tmp="$dir/$file.tmp"
	# Written beside the key and renamed over it, so that a reader never
	# sees half a key; umask 077 makes it 0600 from the start.
	if [ "$alg" = password ]; then
		# 24 letters and digits, no 0: never read as 0x-hex or 0s-base64.
		# (tr ends on SIGPIPE once head has its 24: not a failure.)
		{ LC_ALL=C tr -dc 'A-Za-z1-9' </dev/urandom || true; } | head -c 24 >"$tmp"
		echo >>"$tmp"
	elif ! "${ipsecd[@]}" genkey --alg "$alg" >"$tmp"; then
		rm -f "$tmp"
		echo "genkeys.sh: ipsecd genkey --alg '$alg' failed" >&2
		exit 1
	fi
	chmod 600 "$tmp"
	mv -f "$tmp" "$dir/$file"
	made=$((made + 1))
done <<<"$keys"
# The remote-access example's gateway certificate, self-signed for
# vpn.example.net, and its key (mode 0600): for trying the example, not
# for a real gateway, whose certificate a CA its clients trust issues.
if [ ${#want[@]} -eq 0 ] || [[ " ${want[*]} " == *" keys/gw.pem "* ]]; then
	mkdir -p "$dir/keys"
	if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
		-subj /CN=vpn.example.net -addext subjectAltName=DNS:vpn.example.net \
		-keyout "$dir/keys/gw.key" -out "$dir/keys/gw.pem" 2>/dev/null; then
		echo "genkeys.sh: openssl could not make keys/gw.pem" >&2
		exit 1
	fi
	made=$((made + 1))
fi
if [ ${#want[@]} -gt 0 ] && [ "$made" -ne ${#want[@]} ]; then
	echo "genkeys.sh: made $made of the ${#want[@]} key files asked for (${want[*]}); known: $(echo "$keys" | cut -d: -f1 | tr '\n' ' ')" >&2
	exit 1
fi
echo "genkeys.sh: $made fresh keys (mode 0600) under $dir"
