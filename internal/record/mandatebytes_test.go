package record_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// TestMandateBytesByIdentity: the evaluator is handed a stored mandate's
// bytes only with that mandate's own shared view (authority.Request's
// MandateBytes); an equal map decoded apart gets none, and is encoded.
func TestMandateBytesByIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _, _ := recordtest.Pair(t)
	ofView, ofCopy, err := record.MandateBytesOf(ctx, b.Engine, b.Mandate)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := b.Node.Org.Store.GetMandate(ctx, b.Mandate)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ofView, rec.Body) {
		t.Fatalf("the view's bytes: %q, want the stored %q", ofView, rec.Body)
	}
	if ofCopy != nil {
		t.Fatalf("an equal copy was given the stored bytes")
	}
}
