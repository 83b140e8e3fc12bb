#!/bin/sh
# deploy/compose-check.sh: run docker-compose.yml for real, building its
# images from deploy/Dockerfile the way an engine without BuildKit does
# (the classic builder), on a Docker engine that can pull nothing, and
# check that two instances trade through it to `completed`, with a person
# approving what Northstar's mandate holds for approval, and that both
# organisations' records verify.
#
#   sh deploy/compose-check.sh          # from the repository root
#
# Needs: a running Docker engine; Compose, the v2 plugin (`docker compose`)
# or v1 (`docker-compose`, Debian's package); Go; curl; and a static
# busybox (Debian: busybox-static) at $BUSYBOX or /bin/busybox.
#
# What it does, in order:
#  1. Stand-ins for deploy/Dockerfile's base images, imported from local
#     files (the host's Go toolchain and module downloads, the host's static
#     busybox, a base holding only the non-root user) under the names
#     deploy/Dockerfile uses, but only where the engine holds no image of
#     that name; those it made are removed on exit, with what was built on
#     them that nothing keeps.
#  2. Compose builds party:local and party-init:local from deploy/Dockerfile,
#     unchanged, with DOCKER_BUILDKIT=0 (and COMPOSE_DOCKER_CLI_BUILD=0 for
#     v1): the classic builder, as on an engine without BuildKit.
#  3. The compose file runs unchanged, under its own project name so it
#     never touches a `party` project already on the host: init and pin,
#     then both instances must become healthy (so the named volumes took the
#     images' owners, the read-only root suffices, the health check works).
#  4. The scripted agents trade over MCP on the compose network (name
#     resolution, pinned TLS between the containers); the acceptance waits
#     for Northstar's procurement lead, who approves it with `party
#     approvals` and `party approve` in Northstar's container; the agents
#     must then reach `completed`.
#  5. Each instance's export of that transaction must pass `party verify`
#     (the image's own binary); the MCP and admin ports must be published
#     on 127.0.0.1 only, and MCP must answer 401 without a token.
# Everything it makes (containers, volumes, network, stand-ins, scratch
# files) is removed on exit, pass or fail; the two images stay tagged
# party:local and party-init:local, as `docker compose up --build` would
# leave them.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
project=${PARTY_CHECK_PROJECT:-partycheck}
busybox=${BUSYBOX:-/bin/busybox}
work=$(mktemp -d)
made=""
standins=""
agents=""
start=$(date +%s)

say() { echo "compose-check [$(($(date +%s) - start)) s]: $*"; }
fail() { say "FAIL: $*" >&2; exit 1; }

if docker compose version >/dev/null 2>&1; then
	compose="docker compose"
elif docker-compose version >/dev/null 2>&1; then
	compose=docker-compose
else
	compose=""
fi
dc() { $compose -p "$project" -f docker-compose.yml "$@"; }

cleanup() {
	status=$?
	if [ -n "$agents" ]; then
		kill "$agents" 2>/dev/null || true
	fi
	if [ "$status" -ne 0 ] && [ -n "$compose" ]; then
		dc --profile scripted-agents ps -a >&2 || true
		dc --profile scripted-agents logs --no-color --tail 40 >&2 || true
	fi
	if [ -n "$compose" ]; then
		dc --profile scripted-agents down -v --remove-orphans >/dev/null 2>&1 || true
	fi
	# What the builds left on the stand-ins and no longer needs: the build
	# stage's image, untagged (party:local and party-init:local stay);
	# then the stand-ins themselves.
	for id in $(docker images -q --no-trunc --filter dangling=true 2>/dev/null); do
		p=$id
		while [ -n "$p" ]; do
			case " $standins " in *" $p "*)
				docker rmi "$id" >/dev/null 2>&1 || true
				break
				;;
			esac
			p=$(docker image inspect -f '{{.Parent}}' "$p" 2>/dev/null || true)
		done
	done
	for image in $made; do
		docker rmi "$image" >/dev/null 2>&1 || true
	done
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT INT TERM

docker info >/dev/null 2>&1 || fail "no Docker engine answers (docker info)"
[ -n "$compose" ] || fail "no Compose: neither 'docker compose' (v2) nor 'docker-compose' (v1) answers"
[ -x "$busybox" ] || fail "no busybox at $busybox (set BUSYBOX)"
command -v curl >/dev/null 2>&1 || fail "no curl"
command -v go >/dev/null 2>&1 || fail "no go"
case $(file -L "$busybox" 2>/dev/null || echo static) in
*dynamically*) fail "$busybox is dynamically linked; a static busybox is needed (busybox-static)" ;;
esac
say "compose: $($compose version 2>/dev/null | head -1)"

# 1. The base images deploy/Dockerfile names (FROM lines that are not its
# own stages), each stood in for, where the engine lacks it, by an image
# imported from local files that gives deploy/Dockerfile what it takes
# from the real one and no more.
go_version=$(sed -n 's/^ARG GO_VERSION=//p' deploy/Dockerfile)
stages=$(sed -n 's/^FROM .* AS \([a-z0-9_-]*\)$/\1/p' deploy/Dockerfile)
bases=""
for image in $(sed -n 's/^FROM \(--[^ ]* \)*\([^ ]*\).*/\2/p' deploy/Dockerfile); do
	image=$(echo "$image" | sed "s/\${GO_VERSION}/$go_version/")
	case " $stages " in *" $image "*) continue ;; esac
	bases="$bases $image"
done
small=$work/standin
mkdir -p "$small/bin" "$small/tmp" "$small/etc"
chmod 1777 "$small/tmp"
cp "$busybox" "$small/bin/busybox"
for applet in $("$busybox" --list); do
	[ "$applet" = busybox ] || ln -s busybox "$small/bin/$applet"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$small/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$small/etc/group"
standin() { # IMAGE: import the stand-in for IMAGE
	case ${1%%:*} in
	golang)
		# The Go toolchain on PATH and a shell for RUN, as the golang
		# image has, and this host's module downloads: with GOPROXY=off
		# the build's `go mod download` finds go.mod's modules there or
		# fails, never reaching for the network.
		[ "$(go env GOVERSION)" = "go$go_version" ] || say "note: the golang stand-in carries this host's $(go env GOVERSION) for $1"
		goroot=$(go env GOROOT)
		modcache=$(go env GOMODCACHE)
		tar -c -C "$small" bin tmp etc \
			-C "$(dirname "$goroot")" --exclude="$(basename "$goroot")/test" --transform "s,^$(basename "$goroot"),usr/local/go," "$(basename "$goroot")" \
			-C "$modcache" --transform 's,^cache/download,go/pkg/mod/cache/download,' cache/download |
			docker import --change 'ENV PATH=/usr/local/go/bin:/go/bin:/bin HOME=/root GOPATH=/go GOMODCACHE=/go/pkg/mod GOPROXY=off GOSUMDB=off' \
				--change 'WORKDIR /go' - "$1" ;;
	busybox)
		# A shell and its applets (deploy/init.sh's), as the busybox image.
		tar -c -C "$small" bin tmp etc | docker import --change 'CMD ["sh"]' - "$1" ;;
	gcr.io/distroless/static-debian12)
		# The nonroot user's entries and nothing else: no shell.
		tar -c -C "$small" etc tmp | docker import --change 'USER 65532:65532' --change 'WORKDIR /home/nonroot' - "$1" ;;
	*)
		fail "no stand-in for $1: deploy/Dockerfile starts from an image this script does not know" ;;
	esac
}
for image in $bases; do
	docker image inspect "$image" >/dev/null 2>&1 && continue
	say "$image is not on this engine: importing a stand-in from local files"
	standin "$image" >/dev/null || fail "importing the stand-in for $image"
	made="$made $image"
	standins="$standins $(docker image inspect -f '{{.Id}}' "$image")"
done
rm -rf "$small"

# 2. Compose's own build, classic builder.
say "building party:local and party-init:local from deploy/Dockerfile with the classic builder (DOCKER_BUILDKIT=0)"
DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0 dc --profile scripted-agents build >"$work/build.log" 2>&1 ||
	{ tail -40 "$work/build.log" >&2; fail "compose could not build the images without BuildKit"; }

# 3. Up, and both instances healthy.
say "docker compose up (init, pin, serve) and waiting for both instances to be healthy"
dc up -d --no-build >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; fail "compose up failed"; }
i=0
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$(dc ps -q northstar)" 2>/dev/null)" = healthy ] &&
	[ "$(docker inspect -f '{{.State.Health.Status}}' "$(dc ps -q delta)" 2>/dev/null)" = healthy ]; do
	i=$((i + 1))
	[ "$i" -le 120 ] || fail "the instances did not become healthy within 120 s"
	sleep 1
done

# 4. The agents trade; the person approves.
say "the scripted agents trade over MCP; the acceptance waits for Northstar's procurement lead"
out=$work/agents.log
dc --profile scripted-agents run --rm --no-deps -T agents >"$out" 2>&1 &
agents=$!
req=""
i=0
while [ -z "$req" ]; do
	kill -0 "$agents" 2>/dev/null || { cat "$out" >&2; fail "the scripted agents ended before asking for approval"; }
	i=$((i + 1))
	[ "$i" -le 120 ] || { cat "$out" >&2; fail "no approval request within 120 s"; }
	sleep 1
	req=$(dc exec -T northstar /party approvals --dir /data --json |
		sed -n 's/.*"approval_request_id":"\(req_[A-Za-z0-9_-]*\)".*/\1/p')
done
say "Northstar's procurement lead approves $req (party approve, in Northstar's container)"
dc exec -T northstar /party approve --dir /data "$req" || fail "party approve $req failed"
status=0
wait "$agents" || status=$?
agents=""
[ "$status" -eq 0 ] || { cat "$out" >&2; fail "the scripted agents failed"; }
txn=$(sed -n 's/^Done: \(txn_[A-Za-z0-9_-]*\) reached completed\.$/\1/p' "$out")
[ -n "$txn" ] || { cat "$out" >&2; fail "the scripted agents did not reach completed"; }
say "$txn reached completed after the approval"

# 5. Both exports verify; the published ports are loopback's.
cid=$(docker create party:local)
docker cp "$cid:/party" "$work/party" >/dev/null
docker rm -v "$cid" >/dev/null
for svc in northstar delta; do
	dc exec -T "$svc" /party export --dir /data --transaction "$txn" "/data/check-export-$txn" >/dev/null ||
		fail "$svc could not export $txn"
	docker cp "$(dc ps -q "$svc"):/data/check-export-$txn" "$work/$svc-bundle" >/dev/null
	"$work/party" verify "$work/$svc-bundle" >"$work/$svc-verify.txt" || { cat "$work/$svc-verify.txt" >&2; fail "$svc's bundle does not verify"; }
	say "$svc's bundle: $(grep -m1 -i 'failed' "$work/$svc-verify.txt" || tail -1 "$work/$svc-verify.txt")"
done

for port in 7401 7403 7501 7503; do
	binding=$(docker ps --format '{{.Ports}}' --filter "label=com.docker.compose.project=$project" | tr ',' '\n' | grep -- ":$port->" || true)
	[ -n "$binding" ] || fail "port $port is not published"
	case $binding in
	*0.0.0.0:* | *:::*) fail "port $port is published beyond loopback: $binding" ;;
	esac
done
for port in 7401 7501; do
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/mcp" || echo none)
	[ "$code" = 401 ] || fail "MCP on 127.0.0.1:$port answered $code to a request without a token, want 401"
done

say "PASS: both images built from deploy/Dockerfile without BuildKit, both instances healthy, $txn completed after a person's approval, both bundles verify"
