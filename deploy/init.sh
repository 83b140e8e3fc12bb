#!/bin/sh
# deploy/init.sh: the one-shot initialisation of ONE organisation's party
# instance, run by docker-compose.yml's <org>-init service (image target
# `init`: busybox with /party). Safe to run on every `docker compose up`:
#
#  1. If the state volume (/data) holds no instance yet, `party init` makes
#     one for $PARTY_ORG, listening on 0.0.0.0 inside the container
#     (--container) and reachable by the other instance at
#     https://$PARTY_HOST:7402. If it already holds one, it is kept as it is,
#     after checking that it is $PARTY_ORG's: init never overwrites keys, and
#     a half-made state directory makes `party init` fail rather than
#     guess.
#  2. Once, the first time, the principal issues the mandate requested in
#     /deploy/mandates/$PARTY_ORG.json (when present), valid from now for
#     $PARTY_MANDATE_DAYS days; a marker file in /data records that it was.
#  3. Every time: the instance's peer file (public: TLS pin, principal keys)
#     is copied to /peers/$PARTY_ORG.json, and its agent token to
#     /tokens/agent, the organisation's agent-token volume. Nothing else
#     leaves /data; the admin token and the keys never do.
#
# The paths can be moved with PARTY_DATA, PARTY_PEERS, PARTY_TOKENS and
# PARTY_MANDATE_REQUEST (the tests run this script outside a container).
set -eu
umask 077

: "${PARTY_ORG:?PARTY_ORG must name the organisation, e.g. org_northstar}"
: "${PARTY_HOST:?PARTY_HOST must be the name the other instance reaches this one by, e.g. northstar}"
PARTY=${PARTY:-/party}
DATA=${PARTY_DATA:-/data}
PEERS=${PARTY_PEERS:-/peers}
TOKENS=${PARTY_TOKENS:-/tokens}
MANDATE=${PARTY_MANDATE_REQUEST:-/deploy/mandates/$PARTY_ORG.json}
MANDATE_DAYS=${PARTY_MANDATE_DAYS:-90}
MCP_PORT=${PARTY_MCP_PORT:-7401}
PEER_PORT=${PARTY_PEER_PORT:-7402}
ADMIN_PORT=${PARTY_ADMIN_PORT:-7403}

say() { echo "init[$PARTY_ORG]: $*"; }

# copy SRC DST MODE: write DST through a temporary file and a rename, so a
# reader never sees half a file.
copy() {
	tmp="$2.tmp.$$"
	cp "$1" "$tmp"
	chmod "$3" "$tmp"
	mv -f "$tmp" "$2"
}

if [ -f "$DATA/config.json" ]; then
	if ! grep -q "\"organization_id\": *\"$PARTY_ORG\"" "$DATA/config.json"; then
		say "$DATA holds another organisation's instance; refusing to hand out its files as $PARTY_ORG's" >&2
		exit 1
	fi
	say "keeping the instance already in $DATA"
else
	set -- --dir "$DATA" --org "$PARTY_ORG" --container \
		--mcp-addr "0.0.0.0:$MCP_PORT" --peer-addr "0.0.0.0:$PEER_PORT" --admin-addr "0.0.0.0:$ADMIN_PORT" \
		--public-url "https://$PARTY_HOST:$PEER_PORT" --host "$PARTY_HOST"
	if [ -n "${PARTY_AGENT:-}" ]; then
		set -- "$@" --agent "$PARTY_AGENT"
	fi
	if [ -n "${PARTY_PRINCIPAL:-}" ]; then
		set -- "$@" --principal "$PARTY_PRINCIPAL" --role "${PARTY_ROLE:?PARTY_ROLE must go with PARTY_PRINCIPAL}"
	fi
	say "initialising a new instance in $DATA"
	"$PARTY" init "$@" --json
fi

marker="$DATA/.deploy-mandate-issued"
if [ -f "$MANDATE" ] && [ ! -e "$marker" ]; then
	now=$(date -u +%s)
	from=$(date -u -d "@$now" +%Y-%m-%dT%H:%M:%SZ)
	until=$(date -u -d "@$((now + MANDATE_DAYS * 86400))" +%Y-%m-%dT%H:%M:%SZ)
	req="${TMPDIR:-/tmp}/mandate-request.$$.json"
	sed -e "s/\"valid_from\": *\"[^\"]*\"/\"valid_from\": \"$from\"/" \
		-e "s/\"valid_until\": *\"[^\"]*\"/\"valid_until\": \"$until\"/" "$MANDATE" >"$req"
	say "issuing the mandate requested in $MANDATE, valid $from to $until"
	"$PARTY" mandate issue --dir "$DATA" --file "$req"
	rm -f "$req"
	: >"$marker"
fi

copy "$DATA/peer.json" "$PEERS/$PARTY_ORG.json" 0644
copy "$DATA/tokens/agent" "$TOKENS/agent" 0600
say "peer file at $PEERS/$PARTY_ORG.json, agent token at $TOKENS/agent"
