# syntax=docker/dockerfile:1
#
# The party image: one organisation's instance (`party`), and the two-party
# example's scripted agents (`two-party`), as static binaries on a
# distroless base that has no shell and runs as a non-root user.
#
#   docker build -t party:local .                 # the runtime image (last stage)
#   docker build --target init -t party-init:local .
#
# The `init` stage is the one-shot initialiser docker-compose.yml runs before
# each instance starts: the same binary on busybox, because making `party
# init` idempotent and handing out the peer file and the agent token takes a
# few shell steps (deploy/init.sh), and the runtime image has no shell.
# See docs/deploy.md.
#
# No HEALTHCHECK here: the same image also runs one-shot steps and the
# scripted agents, which have nothing to be healthy about; the compose file
# gives the two long-running instances their health check.

# GO_VERSION matches the go line of go.mod (internal/deploytest checks it).
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
ENV GOTOOLCHAIN=local
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
      go build -trimpath -ldflags="-s -w" -o /out/party ./cmd/party && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
      go build -trimpath -ldflags="-s -w" -o /out/two-party ./examples/two-party
# Mount points owned by the non-root user (65532, distroless's "nonroot"):
# a named volume first mounted on one of them takes its owner and mode, so
# the instance can write its state without running as root. /data holds
# keys, hence 0700.
RUN mkdir -p /rootfs/data /rootfs/peers /rootfs/tokens && chmod 0700 /rootfs/data

# One-shot initialiser (docker-compose.yml's *-init services).
FROM busybox:1.37 AS init
COPY --from=build /out/party /party
COPY --from=build --chown=65532:65532 /rootfs/ /
COPY deploy/init.sh /deploy/init.sh
COPY deploy/mandates/ /deploy/mandates/
USER 65532:65532
ENTRYPOINT ["/bin/sh", "/deploy/init.sh"]

# Runtime: the binaries and nothing else. Last, so that a plain
# `docker build .` makes it.
FROM gcr.io/distroless/static-debian12:nonroot AS party
COPY --from=build /out/party /party
COPY --from=build /out/two-party /two-party
COPY --from=build --chown=65532:65532 /rootfs/ /
USER 65532:65532
VOLUME ["/data"]
# 7401 MCP (agent, bearer token), 7402 peer (HTTPS, pinned mutual TLS),
# 7403 admin (principal, admin token). Publish 7401 and 7403 on 127.0.0.1
# only.
EXPOSE 7401 7402 7403
ENTRYPOINT ["/party"]
CMD ["serve", "--dir", "/data"]
