package https_test

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/bindings/https"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/peering/peeringtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/wiretest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/exchange.txtar from what goes over the wire now")

// goldenAt is when the golden's objects are made and signed.
var goldenAt = time.Date(2026, 6, 1, 9, 30, 0, 0, time.UTC)

// goldenObject is a small evidence object of txn made by n with a fixed id
// and time, so that only its key id and signature differ between runs.
func goldenObject(t *testing.T, n *peeringtest.Node, id, description string) []byte {
	t.Helper()
	cfg := n.Instance.Config
	obj, err := envelope.New(envelope.Spec{
		ObjectType:    "evidence",
		ID:            id,
		CreatedBy:     envelope.Actor{OrganizationID: n.Org, AgentID: cfg.AgentID, MandateID: "mnd_0123456789abcdef01234567"},
		TransactionID: txn,
		CreatedAt:     goldenAt,
		Payload:       map[string]any{"evidence_type": "document", "description": description},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Seal(obj); err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewSigner(cfg.AgentKeyID, n.Instance.AgentKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.Sign(obj, s, "object_issuance", goldenAt); err != nil {
		t.Fatal(err)
	}
	b, err := canonical.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// messageKey is the reply key of a message (delivery.MessageKey): a hash
// over the objects' bytes, signatures included, so new every run.
var messageKey = wiretest.Rule{Name: "message-key", Re: regexp.MustCompile(regexp.QuoteMeta(https.RepliesPath) + `([0-9a-f]{64})\b`)}

// TestWireGolden pins one exchange between two instances over the plain
// HTTPS binding, as A's client sends it and receives B's answers: the GET
// of B's capability preflight, the POST of one object (its headers and
// bare canonical bytes) answered 202 with a Location, and the GET of that
// Location answered with the one-object reply as multipart/mixed. Key
// ids, signatures, the message key, the multipart boundary and ports
// differ between runs and are numbered placeholders; the objects' ids and
// times are fixed. A change to any of it fails here; when the change is
// meant, rewrite the file with
//
//	go test ./bindings/https -run TestWireGolden -update
//
// and review the diff like code.
func TestWireGolden(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	hc, _, err := a.clients.For(b.node.Org)
	if err != nil {
		t.Fatal(err)
	}
	rec := wiretest.Record(hc, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/a202/") })
	obj := goldenObject(t, a.node, "evd_0000000000000000000000a1", "Delivery note, pallet 3")
	replyObj := goldenObject(t, b.node, "evd_0000000000000000000000b1", "Receipt of the delivery note")
	b.app.reply = func([][]byte) ([][]byte, error) { return [][]byte{replyObj}, nil }

	msg, err := a.client.Deliver(context.Background(), b.node.Org, txn, [][]byte{obj})
	reply := msg.Objects
	if err != nil {
		t.Fatal(err)
	}
	if len(reply) != 1 || !bytes.Equal(reply[0], replyObj) {
		t.Fatal("the reply did not come back byte identical")
	}
	got := wiretest.Archive(rec.Exchanges(), wiretest.Options{
		Comment: "One exchange over the plain HTTPS binding: A fetches B's capability preflight, POSTs one object\n" +
			"(answered 202) and GETs the reply the Location names. Recorded under A's client transport; JSON bodies\n" +
			"indented, multipart bodies with CRLF as LF. Key ids, signatures, the message key, the boundary and\n" +
			"ports are numbered placeholders (equal values, equal placeholders); Date and Content-Length are left out.\n" +
			"Regenerate: go test ./bindings/https -run TestWireGolden -update\n",
		Rules: []wiretest.Rule{wiretest.Boundary, messageKey, wiretest.KeyID, wiretest.Signature, wiretest.Port},
		Drop:  []string{"Date", "Content-Length"},
	})
	wiretest.Golden(t, filepath.Join("testdata", "exchange.txtar"), got, *updateGolden,
		"go test ./bindings/https -run TestWireGolden -update")
}
