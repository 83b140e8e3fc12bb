package verify

import (
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
)

// The appender's check of a countersignature.
//
// Every event enters the bilateral record signed by the party appending it
// and countersigned by the other (pilot state machine §8.1; decisions.md
// item 10). Verify judges that rule over a whole record (signatures.go,
// countersignature); the appender judges it once more, at the moment the
// counterparty returns its event countersigned and before it records the
// event as such, on the event alone: Countersigned is that rule, so that
// the appender accepts exactly what a verifier of its record will.

// Countersigned checks got, an event this party appended and signed, as
// ours, and peer returned it countersigned: the same content (its
// content_hash, and the hash of its content as it now reads), exactly two
// signatures, this party's first and unchanged, then peer's event_append.
// Whether that second signature verifies under a key of peer's agent, and
// the key is active, is a live fact of the appender's trust store, not of
// the record: key decides it, given the event's signing input
// (canonical.HashInput) and the entry's index. A refusal carries
// A202-EVIDENCE-HASH-MISMATCH or A202-EVIDENCE-SIGNATURE-INVALID.
func Countersigned(ours, got map[string]any, peer string, key func(signingInput []byte, entry int) error) error {
	id, hash := str(ours, "id"), str(ours, "content_hash")
	if str(got, "content_hash") != hash {
		return reason.Refusef(reason.EvidenceHashMismatch, "%s returned event %s with other content", peer, id)
	}
	in, err := canonical.HashInput(got)
	if err != nil || canonical.SHA256Hex(in) != hash {
		return reason.Refusef(reason.EvidenceHashMismatch, "%s returned event %s with other bytes", peer, id)
	}
	entries, mine := signatureEntries(got), signatureEntries(ours)
	if len(entries) != 2 || len(mine) != 1 {
		return reason.Refusef(reason.EvidenceSignatureInvalid, "the countersigned %s carries %d signatures, not 2", id, len(entries))
	}
	if !sameEntry(mine[0], entries[0]) {
		return reason.Refusef(reason.EvidenceSignatureInvalid, "the countersigned %s does not keep our signature first and unchanged", id)
	}
	if str(entries[1], "purpose") != protocol.PurposeEventAppend {
		return reason.Refusef(reason.EvidenceSignatureInvalid, "the countersignature's purpose is %v", entries[1]["purpose"])
	}
	return key(in, 1)
}

// KeptAndCountersigned reports whether got's signatures are ours's one
// signature, unchanged, then one more of purpose: the shape of an object
// this party signed and the counterparty signed after it (an event's
// event_append, checked by Countersigned; an agreement's
// agreement_commitment, checked by its offeree when it comes back).
func KeptAndCountersigned(ours, got map[string]any, purpose string) bool {
	entries, mine := signatureEntries(got), signatureEntries(ours)
	return len(entries) == 2 && len(mine) == 1 && sameEntry(mine[0], entries[0]) && str(entries[1], "purpose") == purpose
}

// signatureEntries lists the signature entries of o that are objects.
func signatureEntries(o map[string]any) []map[string]any {
	list, _ := o["signatures"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if e, ok := x.(map[string]any); ok {
			out = append(out, e)
		}
	}
	return out
}

// sameEntry reports whether two signature entries are the same: the same
// members, and the same value of each member an entry has.
func sameEntry(a, b map[string]any) bool {
	for _, k := range []string{"key_id", "algorithm", "signature", "signed_at", "purpose"} {
		if str(a, k) != str(b, k) {
			return false
		}
	}
	return len(a) == len(b)
}
