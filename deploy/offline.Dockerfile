# The same two images as deploy/Dockerfile (party:local and
# party-init:local, same entrypoints, users, mount points and ports), built
# from files already on this machine for a Docker engine that can pull
# nothing: no golang, busybox or distroless base image, no BuildKit
# frontend. deploy/compose-check.sh assembles the build context (binaries
# built by the host's Go toolchain, the host's static busybox, deploy/init.sh
# and deploy/mandates) and builds both stages with it; docker-compose.yml
# then runs them unchanged.
#
# Context layout (made by deploy/compose-check.sh):
#   party, two-party      static linux binaries (CGO_ENABLED=0)
#   busybox/bin/          a static busybox and its applets as symlinks
#   rootfs/               /data (0700), /peers, /tokens, /tmp
#   deploy/               init.sh and mandates/

# One-shot initialiser: busybox for deploy/init.sh's few shell steps.
FROM scratch AS init
COPY busybox/ /
COPY party /party
COPY --chown=65532:65532 rootfs/ /
COPY deploy/init.sh /deploy/init.sh
COPY deploy/mandates/ /deploy/mandates/
USER 65532:65532
ENTRYPOINT ["/bin/sh", "/deploy/init.sh"]

# Runtime: the binaries and nothing else, as on distroless static (no
# shell, non-root). party needs no CA bundle (peers are pinned) and keeps
# time in UTC.
FROM scratch AS party
COPY party /party
COPY two-party /two-party
COPY --chown=65532:65532 rootfs/ /
USER 65532:65532
VOLUME ["/data"]
EXPOSE 7401 7402 7403
ENTRYPOINT ["/party"]
CMD ["serve", "--dir", "/data"]
