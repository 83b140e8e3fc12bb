package verify

import (
	"fmt"
	"sort"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/schema"
)

// The closed registries a bundle's types resolve in. Evidence types:
// evidence verification §3.1. Due condition types: obligation §4.
// Constraint types and operators: commercial mandate §4.
var (
	evidenceTypes = setOf("attestation", "third_party_certificate", "inspection_result",
		"delivery_confirmation", "measurement_record", "adapter_receipt",
		"verification_report", "signed_document")
	conditionTypes  = setOf("due_at_time", "due_on_event", "due_on_discharge", "all_of")
	constraintTypes = setOf("commercial.decimal", "commercial.integer", "commercial.string",
		"commercial.boolean", "commercial.timestamp", "commercial.set", "disclosure.path",
		"evidence.reference", "counterparty.reference", "geography.reference")
	constraintOperators = setOf("equals", "not_equals", "one_of", "none_of", "minimum",
		"maximum", "matches", "present", "absent", "before", "after", "evidence_verified")
)

func setOf(list ...string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

func (r *run) evidenceType(typ string) {
	if !evidenceTypes[typ] {
		r.unregistered["evidence_type "+show(typ)] = true
	}
}

// Step 7: state every gap (§4 step 7): undisclosed streams, unresolved
// references, unreferenced evidence, unregistered types. Each is a
// not_checkable check, never failed and never verified, and each is also
// listed in the report's own member.
func (r *run) step7() {
	r.statements()
	for _, o := range r.objs {
		switch o.typ {
		case protocol.PolicyDecision:
			// A decision names the stream it was made for; one the bundle
			// does not disclose (the peer's own decision stream, say) is
			// a stream referenced and withheld. A session identifier on an
			// offer names no stream: the bilateral path has no session
			// stream at all (canonical model §9.2), so it is not listed.
			if sm, ok := objAt(o.payload, "stream"); ok {
				key := str(sm, "kind") + ":" + str(sm, "id")
				if _, disclosed := r.streamBy[key]; !disclosed {
					r.undisclosed[key] = true
				}
			}
		case protocol.Evidence:
			r.evidenceType(str(o.payload, "evidence_type"))
		case protocol.Obligation:
			r.conditionTypes(o.payload["due_condition"], 0)
		case protocol.Offer, protocol.Agreement:
			if terms, ok := objAt(o.payload, "terms"); ok {
				if p, ok := strAt(terms, "profile"); !ok || !schema.ProfileKnown(p) {
					r.unregistered["profile "+show(terms["profile"])] = true
				}
			}
		}
	}
	for _, m := range r.mandates {
		cs, _ := m.val["constraints"].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			if t := cm["type"]; !constraintTypes[str(cm, "type")] {
				r.unregistered["constraint type "+show(t)] = true
			}
			if op := cm["operator"]; !constraintOperators[str(cm, "operator")] {
				r.unregistered["constraint operator "+show(op)] = true
			}
		}
	}

	for _, s := range sortedSet(r.undisclosed) {
		r.add(7, "stream_disclosed", s, NotCheckable, "", "objects in the bundle name this stream, and the bundle does not disclose it; nothing about it is inferred")
	}
	for _, id := range sortedSet(r.unresolved) {
		r.add(7, "reference_resolves", id, NotCheckable, "", "a check needed this and the bundle does not hold it")
	}
	var unreferenced []string
	for _, o := range r.objs {
		if o.typ == protocol.Evidence && o.id != "" && !r.referenced[o.id] {
			unreferenced = append(unreferenced, o.id)
		}
	}
	sort.Strings(unreferenced)
	for i, id := range unreferenced {
		if i == 0 || unreferenced[i-1] != id {
			r.add(7, "evidence_referenced", id, NotCheckable, "", "nothing in the bundle references this evidence: it supports nothing, and it is not a failure")
		}
	}
	for _, t := range sortedSet(r.unregistered) {
		r.add(7, "type_registered", t, NotCheckable, "", fmt.Sprintf("%s does not resolve in its registry, so nothing read from it is checked", t))
	}
}

// conditionTypes records unregistered due condition types, descending one
// level into all_of (the only nesting obligation §4 allows).
func (r *run) conditionTypes(v any, depth int) {
	c, ok := v.(map[string]any)
	if !ok || depth > 1 {
		return
	}
	t := c["type"]
	if !conditionTypes[str(c, "type")] {
		r.unregistered["condition type "+show(t)] = true
		return
	}
	if str(c, "type") == "all_of" {
		list, _ := c["conditions"].([]any)
		for _, e := range list {
			r.conditionTypes(e, depth+1)
		}
	}
}
