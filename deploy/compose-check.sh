#!/bin/sh
# deploy/compose-check.sh: run docker-compose.yml for real, on a Docker
# engine that can pull nothing, and check that two instances trade through
# it to `completed` and that both organisations' records verify.
#
#   sh deploy/compose-check.sh          # from the repository root
#
# Needs: a running Docker engine, the Compose v2 CLI (`docker compose`),
# Go, curl, and a static busybox (Debian: busybox-static) at $BUSYBOX or
# /bin/busybox. The images are those of deploy/Dockerfile rebuilt from
# local files by deploy/offline.Dockerfile (no base image, no network);
# the compose file itself runs unchanged, under its own project name so it
# never touches a `party` project already on the host. Everything it makes
# (containers, volumes, network, the scratch build context) is removed on
# exit, pass or fail; the two images stay tagged party:local and
# party-init:local, as `docker compose up --build` would leave them.
#
# What it checks, in order: both images build; `up --wait` brings both
# instances to healthy after init and pin (so the named volumes took the
# images' owners, the read-only root suffices, the health check works);
# the scripted agents reach `completed` over MCP on the compose network
# (name resolution and pinned TLS between the containers); each
# instance's export of that transaction verifies with `party verify`; and
# the published ports answer on 127.0.0.1 only.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
project=${PARTY_CHECK_PROJECT:-partycheck}
busybox=${BUSYBOX:-/bin/busybox}
work=$(mktemp -d)

say() { echo "compose-check: $*"; }
fail() { say "FAIL: $*" >&2; exit 1; }
dc() { docker compose -p "$project" -f docker-compose.yml "$@"; }

cleanup() {
	status=$?
	if [ "$status" -ne 0 ]; then
		dc ps -a >&2 || true
		dc logs --no-color --tail 40 >&2 || true
	fi
	dc --profile scripted-agents down -v --remove-orphans >/dev/null 2>&1 || true
	rm -rf "$work"
	exit "$status"
}
trap cleanup EXIT INT TERM

docker info >/dev/null 2>&1 || fail "no Docker engine answers (docker info)"
docker compose version >/dev/null 2>&1 || fail "no Compose v2 CLI (docker compose version)"
[ -x "$busybox" ] || fail "no busybox at $busybox (set BUSYBOX)"
command -v curl >/dev/null 2>&1 || fail "no curl"
case $(file -L "$busybox" 2>/dev/null || echo static) in
*dynamically*) fail "$busybox is dynamically linked; a static busybox is needed (busybox-static)" ;;
esac

say "building the binaries and the build context in $work"
ctx=$work/context
mkdir -p "$ctx/busybox/bin" "$ctx/rootfs/data" "$ctx/rootfs/peers" "$ctx/rootfs/tokens" "$ctx/rootfs/tmp" "$ctx/deploy"
chmod 0700 "$ctx/rootfs/data"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o "$ctx/party" ./cmd/party
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o "$ctx/two-party" ./examples/two-party
cp "$busybox" "$ctx/busybox/bin/busybox"
for applet in sh cat chmod cp date echo grep mkdir mv rm sed; do
	ln -s busybox "$ctx/busybox/bin/$applet"
done
cp deploy/init.sh "$ctx/deploy/init.sh"
cp -r deploy/mandates "$ctx/deploy/mandates"

say "building party-init:local and party:local from local files"
docker build -q -f deploy/offline.Dockerfile --target init -t party-init:local "$ctx" >/dev/null
docker build -q -f deploy/offline.Dockerfile --target party -t party:local "$ctx" >/dev/null

say "docker compose up (init, pin, serve) and waiting for both instances to be healthy"
dc up -d --no-build --wait --wait-timeout 120 >/dev/null 2>&1 || fail "the instances did not become healthy"
for svc in northstar delta; do
	health=$(docker inspect -f '{{.State.Health.Status}}' "$(dc ps -q "$svc")")
	[ "$health" = healthy ] || fail "$svc is $health"
done

say "the scripted agents trade over MCP"
out=$work/agents.log
dc --profile scripted-agents run --rm --no-deps agents >"$out" 2>&1 || { cat "$out" >&2; fail "the scripted agents failed"; }
txn=$(sed -n 's/^Done: \(txn_[A-Za-z0-9_-]*\) reached completed\.$/\1/p' "$out")
[ -n "$txn" ] || { cat "$out" >&2; fail "the scripted agents did not reach completed"; }
say "$txn reached completed"

for svc in northstar delta; do
	dc exec -T "$svc" /party export --dir /data --transaction "$txn" "/data/check-export-$txn" >/dev/null ||
		fail "$svc could not export $txn"
	docker cp "$(dc ps -q "$svc"):/data/check-export-$txn" "$work/$svc-bundle" >/dev/null
	"$ctx/party" verify "$work/$svc-bundle" >"$work/$svc-verify.txt" || { cat "$work/$svc-verify.txt" >&2; fail "$svc's bundle does not verify"; }
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

say "PASS: both images built from local files, both instances healthy, $txn completed, both bundles verify"
