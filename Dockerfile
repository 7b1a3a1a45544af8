# The ipsecd container image: one static binary in an otherwise empty image,
# built from the source in two stages. From the repository root:
#
#   podman build -t localhost/ipsecd:dev .        (or docker build)
#   scripts/image.sh localhost/ipsecd:dev         (the same, with version labels)
#
# The first stage compiles with the Go image named by GO_IMAGE (the official
# one by default) and fetches modules from GOPROXY (Go's default proxy
# unless given). Where no registry is reachable, any local image with a Go
# toolchain on PATH, a /tmp and CA certificates will do (no shell needed;
# integration/container_test.go makes one from the machine's Go):
#
#   podman build --build-arg GO_IMAGE=localhost/go:1.26 .
#
# Build as root: the binary gets its file capabilities in the first stage
# (CAP_SETFCAP), and a rootless build would store them for the wrong user
# namespace. podman keeps HEALTHCHECK only in the Docker image format: add
# --format docker (docker build always does).
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
# Run it (docs/deploy.md; deploy/kubernetes for a sidecar):
#
#   podman run -d --network host --device /dev/net/tun --cap-add NET_ADMIN \
#     -v /etc/ipsecd:/etc/ipsecd:ro localhost/ipsecd:dev
#
# with /etc/ipsecd/ipsecd.yaml and its key files readable by uid 65532.

ARG GO_IMAGE=docker.io/library/golang:1.26

FROM ${GO_IMAGE} AS build
# Go's defaults; pass your own with --build-arg.
ARG GOPROXY=https://proxy.golang.org,direct
ARG GOSUMDB=sum.golang.org
# A static binary (no libc in the image), built by the toolchain in the
# image (no toolchain download), without VCS stamping (.git is not in the
# build context). The caches are named so that the cache mounts below find
# them in any Go image.
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    GOMODCACHE=/cache/gomod GOCACHE=/cache/gobuild
WORKDIR /src
COPY . .
# The cache mounts keep modules and compiled packages between builds on
# the same machine, out of the image. The exec form needs no shell in the
# Go image. setfcap (internal/cmd/setfcap) does what setcap
# cap_net_admin,cap_net_raw=p does, so that the Go image needs no setcap.
RUN --mount=type=cache,target=/cache/gomod --mount=type=cache,target=/cache/gobuild \
    ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", "/out/ipsecd", "./cmd/ipsecd"]
RUN --mount=type=cache,target=/cache/gomod --mount=type=cache,target=/cache/gobuild \
    ["go", "run", "./internal/cmd/setfcap", "-caps", "net_admin,net_raw", "/out/ipsecd"]

FROM scratch
# The version and the VCS revision the image is built from, for its
# labels (scripts/image.sh passes git describe and git rev-parse HEAD).
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="ipsecd" \
      org.opencontainers.image.description="userspace IPsec (ESP) VPN endpoint" \
      org.opencontainers.image.source="https://github.com/ipsecd/ipsecd" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# /etc/passwd and /etc/group name uid 65532 "ipsecd" (for ps and podman top);
# /run exists for the control socket's directory.
COPY deploy/image/rootfs/ /
# The control socket's directory, owned by the daemon's user: /run itself
# stays root's.
COPY --chown=65532:65532 deploy/image/run-ipsecd/ /run/ipsecd/
# state_dir's default, owned by the daemon's user: how far each static
# key's sequence numbers went (docs/keys.md, "Keys, restarts and the state
# directory"). Mount a persistent volume here so that it outlives the
# container: a re-created container without one finds it empty, and its
# static keys start again at sequence number 1, reusing nonces.
COPY --chown=65532:65532 deploy/image/var-lib-ipsecd/ /var/lib/ipsecd/
COPY LICENSE /LICENSE
# COPY keeps the security.capability attribute setfcap wrote.
COPY --from=build /out/ipsecd /ipsecd
USER 65532:65532
# ESP in UDP (RFC 3948).
EXPOSE 4500/udp
# Healthy while the daemon answers on the control socket the config names.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
    CMD ["/ipsecd", "health", "--config", "/etc/ipsecd/ipsecd.yaml"]
ENTRYPOINT ["/ipsecd"]
CMD ["run", "--config", "/etc/ipsecd/ipsecd.yaml"]
