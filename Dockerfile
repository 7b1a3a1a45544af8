# The ipsecd container image: one static binary in an otherwise empty image.
#
# Nothing is pulled. The binary is built beforehand and COPYed into FROM
# scratch, as GoReleaser-built images are; scripts/image.sh does it all:
#
#   scripts/image.sh localhost/ipsecd:dev
#
# or by hand, from the repository root (setcap needs root):
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o dist/ipsecd ./cmd/ipsecd
#   setcap cap_net_admin,cap_net_raw=p dist/ipsecd
#   podman build -t localhost/ipsecd:dev .
#
# The daemon runs as uid/gid 65532, not root. It needs CAP_NET_ADMIN (TUN
# devices, their addresses and routes, SO_MARK) and, only with
# underlay.raw_esp, CAP_NET_RAW. A non-root process keeps capabilities
# across exec only as ambient capabilities (podman sets them for
# --cap-add; Docker and Kubernetes do not) or as file capabilities, so the
# binary carries cap_net_admin,cap_net_raw as *permitted* file capabilities
# and the daemon makes them effective at start. Without the effective bit
# the binary still execs when the container lacks one of them; what the
# container's bounding set (--cap-add) does not grant stays out of reach.
#
# Run it (README.md, "Container"; deploy/kubernetes for a sidecar):
#
#   podman run -d --network host --device /dev/net/tun --cap-add NET_ADMIN \
#     -v /etc/ipsecd:/etc/ipsecd:ro localhost/ipsecd:dev
#
# with /etc/ipsecd/ipsecd.yaml and its key files readable by uid 65532.
FROM scratch
LABEL org.opencontainers.image.title="ipsecd" \
      org.opencontainers.image.description="userspace IPsec (ESP) VPN endpoint"
# /etc/passwd and /etc/group name uid 65532 "ipsecd" (for ps and podman top);
# /run exists for the control socket's directory.
COPY deploy/image/rootfs/ /
# The control socket's directory, owned by the daemon's user: /run itself
# stays root's.
COPY --chown=65532:65532 deploy/image/run-ipsecd/ /run/ipsecd/
# state_dir's default, owned by the daemon's user: how far each static
# key's sequence numbers went (README.md, "Keys, restarts and the state
# directory"). Mount a persistent volume here so that it outlives the
# container: a re-created container without one finds it empty, and its
# static keys start again at sequence number 1, reusing nonces.
COPY --chown=65532:65532 deploy/image/var-lib-ipsecd/ /var/lib/ipsecd/
COPY dist/ipsecd /ipsecd
USER 65532:65532
# ESP in UDP (RFC 3948).
EXPOSE 4500/udp
ENTRYPOINT ["/ipsecd"]
CMD ["run", "--config", "/etc/ipsecd/ipsecd.yaml"]
