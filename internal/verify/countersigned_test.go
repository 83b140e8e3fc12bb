package verify_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/verify"
	"github.com/partyd/party/internal/verify/verifytest"
)

// Countersigned accepts the appender's own event returned with one more
// signature, the peer's event_append, and hands that signature to the key
// check; anything else returned is refused with the rule's code, and the
// key check is not asked.
func TestCountersigned(t *testing.T) {
	rec, err := verifytest.New(2)
	if err != nil {
		t.Fatal(err)
	}
	signed := rec.Object(rec.EventIDs[0]) // the appender's and the countersigner's signatures
	ours := clone(t, signed)
	ours["signatures"] = ours["signatures"].([]any)[:1]

	for _, c := range []struct {
		name string
		edit func(got map[string]any)
		key  error
		want reason.Code
	}{
		{name: "countersigned"},
		{name: "the key check refuses", key: reason.Refusef(reason.EvidenceSignatureInvalid, "no key"), want: reason.EvidenceSignatureInvalid},
		{name: "other content_hash", edit: func(g map[string]any) { g["content_hash"] = canonical.SHA256Hex([]byte("x")) }, want: reason.EvidenceHashMismatch},
		{name: "other bytes", edit: func(g map[string]any) { g["payload"].(map[string]any)["occurred_at"] = "2020-01-01T00:00:00Z" }, want: reason.EvidenceHashMismatch},
		{name: "not countersigned", edit: func(g map[string]any) { g["signatures"] = g["signatures"].([]any)[:1] }, want: reason.EvidenceSignatureInvalid},
		{name: "three signatures", edit: func(g map[string]any) {
			s := g["signatures"].([]any)
			g["signatures"] = append(slices.Clip(s), s[1])
		}, want: reason.EvidenceSignatureInvalid},
		{name: "ours second", edit: func(g map[string]any) {
			s := g["signatures"].([]any)
			g["signatures"] = []any{s[1], s[0]}
		}, want: reason.EvidenceSignatureInvalid},
		{name: "ours changed", edit: func(g map[string]any) {
			g["signatures"].([]any)[0].(map[string]any)["signed_at"] = "2020-01-01T00:00:00Z"
		}, want: reason.EvidenceSignatureInvalid},
		{name: "other purpose", edit: func(g map[string]any) {
			g["signatures"].([]any)[1].(map[string]any)["purpose"] = "agreement_commitment"
		}, want: reason.EvidenceSignatureInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := clone(t, signed)
			if c.edit != nil {
				c.edit(got)
			}
			asked := -1
			err := verify.Countersigned(ours, got, "org_supplier", func(in []byte, i int) error {
				if h := canonical.SHA256Hex(in); h != ours["content_hash"] {
					t.Errorf("the key check is given the signing input of %s", h)
				}
				asked = i
				return c.key
			})
			var r *reason.Refusal
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && asked != 1:
				t.Fatalf("the key check was asked about entry %d, not 1", asked)
			case c.want != "" && (!errors.As(err, &r) || !slices.Contains(r.Codes, c.want)):
				t.Fatalf("%v, want a refusal with %s", err, c.want)
			case c.want != "" && c.key == nil && asked >= 0:
				t.Fatal("the key check was asked about a refused event")
			}
		})
	}
}

// clone copies an object deeply, through its canonical bytes.
func clone(t *testing.T, o map[string]any) map[string]any {
	t.Helper()
	b, err := canonical.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canonical.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
