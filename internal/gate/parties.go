package gate

import (
	"sync"

	"github.com/partyd/party/internal/reason"
)

// railRegistry is the process's registered settlement rails. The
// specification keeps no shared registry (settlement §2.3, spec-map D17):
// the synthetic sandbox rail is always registered, so that the allow
// direction is testable, and an instance registers the rails its
// config.json names when it starts (RegisterRails). Nothing routes money to
// a default adapter: an unregistered rail is A202-SETTLEMENT-RAIL-UNKNOWN.
var (
	railMu       sync.RWMutex
	railRegistry = setOf("rail_test_sandbox")
)

// RegisterRails adds rails to the registered set this process's gate
// judges instructions against.
func RegisterRails(ids ...string) {
	railMu.Lock()
	defer railMu.Unlock()
	for _, id := range ids {
		railRegistry[id] = true
	}
}

// RailRegistered reports whether rail is in the registered set.
func RailRegistered(rail string) bool {
	railMu.RLock()
	defer railMu.RUnlock()
	return railRegistry[rail]
}

func checkSettlement(ps *problems, p map[string]any) {
	if r, _ := strAt(p, "rail"); !RailRegistered(r) {
		ps.add(reason.SettlementRailUnknown, "/payload/rail", "rail %q is not in the registered rail set", r)
	}
	trigger, ok := objAt(p, "trigger")
	if !ok {
		ps.add(reason.SettlementTriggerAbsent, "/payload/trigger", "a settlement instruction names the commercial act that triggers it (settlement §3)")
	} else {
		if h, _ := strAt(trigger, "accepting_act_hash"); h == "" {
			ps.add(reason.SettlementTriggerAbsent, "/payload/trigger/accepting_act_hash", "the trigger names the accepting act by content hash")
		}
		if c, _ := strAt(trigger, "condition_ref"); c == "" {
			ps.add(reason.SettlementTriggerAbsent, "/payload/trigger/condition_ref", "the trigger names the condition it satisfies")
		}
	}
	payer, _ := strAt(p, "payer_organization_id")
	payee, _ := strAt(p, "payee_organization_id")
	if payee != "" && payee == payer {
		// Money paid to oneself moves through somebody's custody on the
		// way; the payee is the owed party (settlement §6; C14).
		ps.add(reason.SettlementCustodyRefused, "/payload/payee_organization_id", "payer and payee are the same organisation")
	}
	checkMoney(ps, "/payload/amount", p["amount"])
}

func checkPolicyDecision(ps *problems, p map[string]any) {
	if d, _ := strAt(p, "decision"); d != "deny" {
		return
	}
	// A deny never leaves the actor's private stream (canonical model §9.1,
	// §12 first row).
	if v, _ := strAt(p, "visibility"); v != "private_to_actor" && v != "operator_only" {
		ps.add(reason.DisclosureDenied, "/payload/visibility", "a deny decision is visible only to the actor, not %q", v)
	}
	stream, _ := objAt(p, "stream")
	if k, _ := strAt(stream, "kind"); k != "private" {
		ps.add(reason.DisclosureDenied, "/payload/stream/kind", "a deny decision sits on the actor's private stream, not %q", k)
	}
}

func checkOrganization(ps *problems, p map[string]any) {
	if _, ok := p["assurance"]; ok {
		// The organization payload has no assurance member: a level a
		// party declares for itself has nothing behind it, and a second
		// home for assurance would be a second answer (canonical model §12;
		// spec-map C24).
		ps.add(reason.AssuranceUnsupported, "/payload/assurance", "an organization declares no assurance level of its own")
	}
	if v, ok := member(p, "identity_evidence_refs"); ok {
		checkEvidenceRefs(ps, "/payload/identity_evidence_refs", v, false)
	}
}

var principalMembers = setOf("organization_id", "role", "status", "authority_evidence_refs", "contact_ref")

func checkPrincipal(ps *problems, p map[string]any) {
	// A principal carries a role, never personal data: names and addresses
	// stay behind an opaque chn_ reference (canonical model §5.1, §13).
	undisclosable(ps, "/payload", p, principalMembers, "a principal")
	if c, ok := member(p, "contact_ref"); ok && c != nil {
		if s, _ := c.(string); !hasPrefixID(s, "chn") {
			ps.add(reason.DisclosureDenied, "/payload/contact_ref", "contact_ref is an opaque chn_ reference, never a raw channel address")
		}
	}
	if v, ok := member(p, "authority_evidence_refs"); ok {
		checkEvidenceRefs(ps, "/payload/authority_evidence_refs", v, false)
	}
}

// jwkPublicMembers are the only members a published JWK may carry, by key
// type (kernel keyRecordPayload; decisions.md item 5).
var jwkPublicMembers = map[string]map[string]bool{
	"EC":  setOf("kty", "crv", "x", "y"),
	"OKP": setOf("kty", "crv", "x"),
}

func checkKeyRecord(ps *problems, p map[string]any) {
	jwk, ok := objAt(p, "public_key_jwk")
	if !ok {
		ps.add("", "/payload/public_key_jwk", "a key record publishes a JWK")
	} else {
		kty, _ := strAt(jwk, "kty")
		public, known := jwkPublicMembers[kty]
		if !known {
			ps.add("", "/payload/public_key_jwk/kty", "key type %q is not a registered suite (EC P-256 or OKP Ed25519)", kty)
		}
		for _, k := range sortedKeys(jwk) {
			if known && !public[k] {
				ps.add(reason.DisclosureDenied, pointer("/payload/public_key_jwk", k), "a key record carries public members only; %q is not one", k)
			}
		}
	}
	from, ok1 := timeAt(p, "valid_from")
	if until, ok2 := timeAt(p, "valid_until"); ok1 && ok2 && !until.After(from) {
		ps.add("", "/payload/valid_until", "a key's validity ends after it begins")
	}
}

// checkEvent covers a transaction_event on its own: registered stream
// kinds, the stream it may sit on, its data allowlist, and deletion.
func checkEvent(ps *problems, o, p map[string]any) {
	stream, _ := objAt(p, "stream")
	kind, _ := strAt(stream, "kind")
	switch kind {
	case "transaction":
		id, _ := strAt(stream, "id")
		if txn, ok := strAt(o, "transaction_id"); ok && id != txn {
			ps.add(reason.StreamMismatch, "/payload/stream/id", "a transaction-stream event sits on its own transaction's stream")
		}
	case "session":
	default:
		// v0.1 defines two stream kinds; an event on any other is a format
		// this version does not define, refused rather than approximated.
		ps.add(reason.AuctionFormatUnsupported, "/payload/stream/kind", "stream kind %q is not registered", kind)
	}
	checkEventData(ps, kind, p)
	if et, _ := strAt(p, "event_type"); isDeletion(et) {
		// Nothing in the protocol is deleted; a deletion event names an
		// operation that does not exist (determination §5).
		ps.add(reason.StateTransitionDenied, "/payload/event_type", "%q names a deletion, which is not a defined operation", et)
	}
	if n, ok := intAt(p, "sequence"); !ok || n < 1 {
		ps.add("", "/payload/sequence", "sequence is an integer of at least 1")
	}
}
