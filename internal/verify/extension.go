package verify

import (
	"fmt"
	"strings"

	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/ledger"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// The countersigner's check: the seven steps applied to one extension of
// a record.
//
// A party countersigns an event only when its own verifier would accept
// the record extended by it (pilot state machine §8.1; decisions.md 10).
// Extend is that check, made with the same rule implementations Verify
// uses, over a working set rather than a whole bundle: the message's
// objects (New, the event among them) and the objects of the record the
// rules read about them (Held: what the new objects name, the event they
// extend, and the small sets a guard looks across, such as a session's
// offers), which Gather reads through a Reader (workingset.go). Held
// objects were verified when this instance stored them, so their
// signatures are taken as verified (Input.Checked) rather than verified
// again; their bytes are still hashed, since rules compare hashes.
//
// The outcome is the checks about the new objects, and every one of them
// must be verified: a failed check is a refusal with its registered code,
// and a not_checkable one is a refusal too, because a countersignature says
// "this verifies", and "this could not be checked" is not that. The
// countersignature the new event still lacks is the one thing not asked
// for (AwaitingCountersignature).
//
// Checks about held objects (a held event's own stream start, say, which a
// working set shows only from mid-stream) are not the extension's concern
// and are left out.

// Extension is a working set: held objects, the message's new ones, the
// mandates and keys they are checked under.
type Extension struct {
	// Held are objects of the record, each decoded from the bytes held.
	Held []map[string]any
	// New are the objects of the message being checked.
	New []map[string]any
	// Mandates are the mandates the objects were made under, with their
	// parents; they were verified when stored.
	Mandates []map[string]any
	// Keys are the public keys the countersigner trusts for both parties.
	Keys *keys.KeySet
	// Awaiting names new objects besides the event that await this
	// party's own signature (an agreement its offeror is asked to sign).
	Awaiting []string
}

// Outcome is the countersigner's verdict on an extension.
type Outcome struct {
	// Checks are the checks about the new objects, in report order (with
	// Options.CountVerified, those that did not verify).
	Checks []Check
	// Findings are the ledger's findings about the new objects (party's
	// own rules, ledger.go): each refuses the extension as a failed check
	// does, since a countersignature says the record the signer's own
	// rules accept.
	Findings []ledger.Finding
}

// Err returns nil when every check about the new objects verified, and
// otherwise a refusal carrying the codes of the failed checks (and, when
// only not_checkable ones stand in the way, the codes of the rules they
// belong to, with "not checkable" in the detail).
func (o Outcome) Err() error {
	var failed, open []Check
	for _, c := range o.Checks {
		switch c.Result {
		case Failed:
			failed = append(failed, c)
		case NotCheckable:
			open = append(open, c)
		}
	}
	if len(failed) == 0 && len(open) == 0 && len(o.Findings) == 0 {
		return nil
	}
	var codes []reason.Code
	seen := map[reason.Code]bool{}
	var parts []string
	for _, f := range o.Findings {
		if !seen[f.Code] {
			seen[f.Code] = true
			codes = append(codes, f.Code)
		}
		parts = append(parts, fmt.Sprintf("%s on %s: %s", f.Rule, f.Subject, f.Detail))
	}
	for _, c := range failed {
		if !seen[c.Code] {
			seen[c.Code] = true
			codes = append(codes, c.Code)
		}
		parts = append(parts, fmt.Sprintf("%s on %s failed: %s", c.Name, c.Subject, c.Detail))
	}
	for _, c := range open {
		code := stepCode(c.Step)
		if len(failed) == 0 && len(o.Findings) == 0 && !seen[code] {
			seen[code] = true
			codes = append(codes, code)
		}
		parts = append(parts, fmt.Sprintf("%s on %s is not checkable: %s", c.Name, c.Subject, c.Detail))
	}
	return reason.Refuse("the record extended by this message does not verify: "+strings.Join(parts, "; "), codes...)
}

// stepCode is the code a step's rules fail with, for a check of that step
// that could not be made.
func stepCode(step int) reason.Code {
	switch step {
	case 1:
		return reason.EvidenceHashMismatch
	case 2:
		return reason.EvidenceSignatureInvalid
	case 3, 4:
		return reason.EvidenceChainGap
	case 6:
		return reason.DeterminationNotFollowing
	}
	return reason.EvidenceTransitionIllegal
}

// Extend runs the seven steps over held ∪ new and returns the checks about
// the new objects. opt.RulesVersion is the rules version the event
// appends under; opt.Now the time of the check.
func Extend(x Extension, opt Options) Outcome {
	newIDs := map[string]bool{}
	var event string
	objects := make([]map[string]any, 0, len(x.Held)+len(x.New))
	checked := map[string]bool{}
	for _, o := range x.Held {
		objects = append(objects, o)
		if id, ok := o["id"].(string); ok {
			checked[id] = true
		}
	}
	for _, o := range x.New {
		objects = append(objects, o)
		if id, ok := o["id"].(string); ok {
			newIDs[id] = true
			delete(checked, id)
			if objectType(o) == protocol.TransactionEvent {
				event = id
			}
		}
	}
	for _, m := range x.Mandates {
		if id, ok := m["id"].(string); ok {
			checked[id] = true
		}
	}
	opt.Workers = 1 // a working set is small; the countersigner runs many at once
	opt.awaiting = map[string]bool{}
	if event != "" {
		opt.awaiting[event] = true
	}
	for _, id := range x.Awaiting {
		opt.awaiting[id] = true
	}
	in := Input{Objects: objects, Mandates: x.Mandates, Keys: x.Keys, checked: checked}
	rep := Verify(in, opt)
	var out Outcome
	heldFirst := event != "" && !startsStream(x.New, event)
	for _, c := range rep.Checks {
		switch {
		case newIDs[c.Subject]:
		case c.Step == 4 && c.Name == "event_chain" && event != "" && strings.Contains(c.Detail, event):
			// The link from the held head to the new event (a working set
			// holds other events with gaps between them; their links are
			// not the extension's concern).
		case c.Step == 4 && (c.Name == "stream_start" || c.Name == "stream") && event != "" && !heldFirst:
		default:
			continue
		}
		out.Checks = append(out.Checks, c)
	}
	for _, f := range rep.Ledger.Findings {
		if newIDs[f.Subject] {
			out.Findings = append(out.Findings, f)
		}
	}
	return out
}

// startsStream reports whether the event id among objs is the first of
// its stream (sequence 1, no predecessor).
func startsStream(objs []map[string]any, id string) bool {
	for _, o := range objs {
		if o["id"] != id {
			continue
		}
		p, _ := objAt(o, "payload")
		seq, _ := intAt(p, "sequence")
		return seq == 1 && isNull(p, "previous_event_hash")
	}
	return false
}
