package a2a_test

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/partyd/party/bindings/a2a"
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

// TestWireGolden pins one exchange between two instances over the A2A
// binding, as A's client sends it and receives B's answers: the GET of
// B's AgentCard (the extension's declaration) and message/send carrying
// one object with its one-object reply (method, path, the headers the
// binding sets or answers with, the JSON-RPC bodies, and the objects
// inside the file parts). Message ids, key ids, signatures and ports
// differ between runs and are numbered placeholders; the objects' ids
// and times are fixed. A change to any of it fails here; when the change
// is meant, rewrite the file with
//
//	go test ./bindings/a2a -run TestWireGolden -update
//
// and review the diff like code.
func TestWireGolden(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	hc, _, err := a.clients.For(b.node.Org)
	if err != nil {
		t.Fatal(err)
	}
	rec := wiretest.Record(hc, func(r *http.Request) bool {
		return r.URL.Path == a2a.CardPath || r.URL.Path == a2a.EndpointPath
	})
	obj := goldenObject(t, a.node, "evd_0000000000000000000000a1", "Calibration certificate, gauge 7")
	replyObj := goldenObject(t, b.node, "evd_0000000000000000000000b1", "Receipt of the certificate")
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
		Comment: "One exchange over the A2A binding: A fetches B's AgentCard, then sends message/send with one\n" +
			"object and receives B's one-object reply. Recorded under A's client transport; JSON bodies indented,\n" +
			"file-part objects decoded into object-n.json. Message ids, key ids, signatures and ports are\n" +
			"numbered placeholders (equal values, equal placeholders); Date and Content-Length are left out.\n" +
			"Regenerate: go test ./bindings/a2a -run TestWireGolden -update\n",
		Rules: []wiretest.Rule{wiretest.UUID, wiretest.KeyID, wiretest.Signature, wiretest.Port},
		Drop:  []string{"Date", "Content-Length"},
	})
	wiretest.Golden(t, filepath.Join("testdata", "exchange.txtar"), got, *updateGolden,
		"go test ./bindings/a2a -run TestWireGolden -update")
}
