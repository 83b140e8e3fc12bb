package gate

import (
	"strings"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
)

// CheckTransitions replays the set's events against the rules version in
// force when each appended, never the newest (evidence verification §4
// step 5; pilot state machine §5.3): A202-EVIDENCE-TRANSITION-ILLEGAL for
//
//   - a (from, event, to) the governing version does not register: a
//     transaction-stream event is read against the aggregate machine, and
//     against the obligation machine when its data names an obligation
//     and its states are obligation states; a session-stream event
//     against the session machine;
//   - a from_state that is not the state the stream's previous event left
//     (the recorded state must be the replayed one);
//   - agreement.direct on a transaction that has a session stream, or
//     over an offer that had expired when the event occurred (§5.3
//     guards 1–2);
//   - an event whose policy decision the set holds but which is not an
//     allow bound to the event's action hash (canonical model §9.1).
//
// Deletion events are refused on their own (STATE-TRANSITION-DENIED) and
// not replayed again here.
func CheckTransitions(objects []map[string]any, ctx SetContext) []Problem {
	r := index(objects)
	groups, keys := eventsByStream(objects)
	var ps []Problem
	illegal := func(e map[string]any, path, format string, args ...any) {
		ps = append(ps, at(e, reason.EvidenceTransitionIllegal, path, format, args...))
	}

	hasSession := false
	for _, k := range keys {
		if kind, _ := streamKey(groups[k][0]); kind == "session" {
			hasSession = true
		}
	}

	for _, k := range keys {
		last := map[string]string{} // machine key → state after the previous event
		var prevSeq int64
		for i, e := range groups[k] {
			p := payloadOf(e)
			event, _ := strAt(p, "event_type")
			if isDeletion(event) {
				continue
			}
			seq, _ := intAt(p, "sequence")
			if i > 0 && seq != prevSeq+1 {
				last = map[string]string{} // a gap: nothing to carry over
			}
			prevSeq = seq
			from, _ := strAt(p, "from_state")
			to, _ := strAt(p, "to_state")
			version := ctx.versionFor(idOf(e))
			if !rules.Known(version) {
				illegal(e, "/payload/event_type", "rules version %q is not registered, so nothing is legal under it", version)
				continue
			}
			kind, _ := streamKey(e)
			machine, key := machineOf(kind, p, from, to, version)
			if !rules.Legal(version, machine, from, event, to) {
				detail := "not a legal transition under rules " + version
				if since := rules.Since(machine, from, event); since != "" {
					detail += " (registered from " + since + ")"
				}
				illegal(e, "/payload/event_type", "%s --%s--> %s is %s", from, event, to, detail)
			} else if was, ok := last[key]; ok && was != from {
				illegal(e, "/payload/from_state", "from_state %q is not %q, the state the previous event left", from, was)
			}
			last[key] = to

			if event == "agreement.direct" {
				checkDirectGuards(r, e, p, hasSession, illegal)
			}
			checkDecisionBinding(r, e, p, illegal)
		}
	}
	return ps
}

func isDeletion(event string) bool { return strings.HasSuffix(event, ".deleted") }

// machineOf picks the machine an event replays against and the key its
// state is tracked under.
func machineOf(kind string, p map[string]any, from, to, version string) (rules.Machine, string) {
	if kind == "session" {
		return rules.Session, "session"
	}
	data, _ := objAt(p, "data")
	if obl, ok := strAt(data, "obligation_id"); ok &&
		!rules.Legal(version, rules.Aggregate, from, mustStr(p, "event_type"), to) &&
		(from == "" || rules.IsState(rules.Obligation, from)) && rules.IsState(rules.Obligation, to) {
		return rules.Obligation, "obligation/" + obl
	}
	return rules.Aggregate, "aggregate"
}

func mustStr(m map[string]any, k string) string {
	s, _ := strAt(m, k)
	return s
}

// checkDirectGuards replays the guards of agreement.direct that the set
// can show (pilot state machine §5.3).
func checkDirectGuards(r *record, e, p map[string]any, hasSession bool, illegal func(map[string]any, string, string, ...any)) {
	if hasSession {
		illegal(e, "/payload/event_type", "agreement.direct on a transaction with a session stream: the direct path is not a way around an open negotiation")
	}
	data, _ := objAt(p, "data")
	offerID, _ := strAt(data, "offer_id")
	offer, ok := r.get(offerID, "offer")
	if !ok {
		return
	}
	occurred, ok1 := timeAt(p, "occurred_at")
	until, ok2 := timeAt(payloadOf(offer), "valid_until")
	if ok1 && ok2 && !occurred.Before(until) {
		illegal(e, "/payload/occurred_at", "the offer %s had expired when agreement.direct occurred", offerID)
	}
	accID, _ := strAt(data, "acceptance_id")
	if acc, ok := r.get(accID, "acceptance"); ok {
		if named, _ := strAt(payloadOf(acc), "offer_id"); named != offerID {
			illegal(e, "/payload/data/acceptance_id", "the acceptance %s accepts %s, not %s", accID, named, offerID)
		}
	}
}

// checkDecisionBinding: where the set holds the event's policy decision,
// it is an allow over the same action hash. A denied action never enters
// the record (pilot state machine §8.1).
func checkDecisionBinding(r *record, e, p map[string]any, illegal func(map[string]any, string, string, ...any)) {
	pid, _ := strAt(p, "policy_decision_id")
	d, ok := r.get(pid, "policy_decision")
	if !ok {
		return
	}
	dp := payloadOf(d)
	if dec, _ := strAt(dp, "decision"); dec != "allow" {
		illegal(e, "/payload/policy_decision_id", "the policy decision %s is %q, not allow", pid, dec)
	}
	if ah, _ := strAt(dp, "action_hash"); ah != mustStr(p, "action_hash") {
		illegal(e, "/payload/action_hash", "the policy decision %s is bound to another action", pid)
	}
}
