// Package export writes one transaction of an instance's record as a
// bundle directory (decisions.md 15) that anyone can verify with `party
// verify`: the transaction's recorded objects as the exact bytes held, the
// key records of both organisations (every version of each), the mandates
// the objects were made under (with their parents), the revocation
// records of those mandates and of both organisations' agents and keys,
// keys.json derived from the key records, and bundle.json stating the
// rules version outside the record.
//
// It reads the database only, so it works whether or not `party serve` is
// running (SQLite in WAL mode lets a reader in beside the writer). Events
// still waiting for the counterparty's countersignature are not part of
// the record and are left out, as are objects a caller chooses to withhold
// (selective disclosure, evidence verification §6).
package export

import (
	"context"
	"fmt"
	"sort"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// Options choose what to leave out.
type Options struct {
	// OmitStreams are streams ("kind:id") whose events are withheld.
	OmitStreams []string
	// OmitObjects are object or mandate ids withheld.
	OmitObjects []string
}

// Summary says what was written.
type Summary struct {
	Dir           string `json:"dir"`
	TransactionID string `json:"transaction_id"`
	Objects       int    `json:"objects"`
	Events        int    `json:"events"`
	Mandates      int    `json:"mandates"`
	Keys          int    `json:"keys"`
}

// Write exports transaction txn from st into dir, which must not exist or
// be empty.
func Write(ctx context.Context, st *store.Store, txn, dir string, opt Options) (Summary, error) {
	c, sum, err := Collect(ctx, st, txn)
	if err != nil {
		return Summary{}, err
	}
	if len(opt.OmitObjects) > 0 {
		// A partial export says which objects it withheld, so a verifier
		// reads their absence as a stated boundary (evidence verification
		// §6). Withheld streams need no statement: the verifier names
		// undisclosed streams itself.
		c.Manifest.StatedGaps = append([]string{}, opt.OmitObjects...)
	}
	if err := bundle.Write(dir, c, bundle.WriteOptions{OmitStreams: opt.OmitStreams, OmitObjects: opt.OmitObjects}); err != nil {
		return Summary{}, err
	}
	sum.Dir = dir
	return sum, nil
}

// Collect gathers what Write lays out, without writing it: the contents a
// verifier reads.
func Collect(ctx context.Context, st *store.Store, txn string) (bundle.Contents, Summary, error) {
	c, sum, err := collect(ctx, st, txn)
	return c, sum, err
}

func collect(ctx context.Context, st *store.Store, txn string) (bundle.Contents, Summary, error) {
	t, err := st.GetTransaction(ctx, txn)
	if err != nil {
		return bundle.Contents{}, Summary{}, err
	}
	evs, err := st.Events(ctx, txn)
	if err != nil {
		return bundle.Contents{}, Summary{}, err
	}
	pending := map[string]bool{}
	events := 0
	for _, e := range evs {
		if e.Status != store.EventRecorded {
			pending[e.EventID] = true
		} else {
			events++
		}
	}
	raws, err := st.TransactionObjects(ctx, txn)
	if err != nil {
		return bundle.Contents{}, Summary{}, err
	}
	var objects []map[string]any
	stored := map[string][]byte{} // what is written: the bytes as stored
	mandateIDs := map[string]bool{}
	for _, b := range raws {
		o, err := object.Parse(b)
		if err != nil {
			return bundle.Contents{}, Summary{}, err
		}
		if pending[o.ID()] {
			continue
		}
		objects = append(objects, o.Value())
		stored[o.ID()] = b
		if id := o.Mandate(); id != "" {
			mandateIDs[id] = true
		}
		if o.Type() == protocol.PolicyDecision {
			if ids, ok := o.Payload()["mandate_ids"].([]any); ok {
				for _, id := range ids {
					mandateIDs[fmt.Sprint(id)] = true
				}
			}
		}
	}
	krs, err := st.ObjectsOfType(ctx, string(protocol.KeyRecord))
	if err != nil {
		return bundle.Contents{}, Summary{}, err
	}
	ks := keys.NewKeySet()
	for _, b := range krs {
		o, err := object.Parse(b)
		if err != nil {
			return bundle.Contents{}, Summary{}, err
		}
		if o.P("controller_organization_id") != t.Counterparty && !isLocal(ctx, st, o) {
			continue
		}
		pub, err := keys.ParseJWK(o.Payload()["public_key_jwk"])
		if err != nil {
			return bundle.Contents{}, Summary{}, fmt.Errorf("export: key record %s: %w", o.ID(), err)
		}
		if err := ks.Add(o.ID(), pub); err != nil {
			return bundle.Contents{}, Summary{}, err
		}
		objects = append(objects, o.Value())
		stored[o.ID()] = b
		if id := o.Mandate(); id != "" {
			mandateIDs[id] = true
		}
	}
	var mandates []map[string]any
	seen := map[string]bool{}
	ids := make([]string, 0, len(mandateIDs))
	for id := range mandateIDs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for len(ids) > 0 {
		id := ids[0]
		ids = ids[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		rec, err := st.GetMandate(ctx, id)
		if err != nil {
			continue // not held: the verifier reports it unresolved
		}
		m, err := canonical.DecodeObject(rec.Body)
		if err != nil {
			return bundle.Contents{}, Summary{}, err
		}
		mandates = append(mandates, m)
		stored[id] = rec.Body
		if p, ok := m["parent_mandate_id"].(string); ok && p != "" {
			ids = append(ids, p)
		}
	}
	// The revocation records a third party needs to read the parties'
	// authority as it changed: those of the mandates the bundle holds (the
	// latest of each, as its status endpoint serves it), and those of
	// either party's agents and keys (issue 16).
	inBundle := map[string]bool{}
	for _, m := range mandates {
		inBundle[fmt.Sprint(m["id"])] = true
	}
	revs, err := st.ObjectsOfType(ctx, string(protocol.RevocationRecord))
	if err != nil {
		return bundle.Contents{}, Summary{}, err
	}
	for _, b := range revs {
		o, err := object.Parse(b)
		if err != nil {
			return bundle.Contents{}, Summary{}, err
		}
		switch o.P("subject_type") {
		case "mandate":
			if !inBundle[o.P("subject_id")] {
				continue
			}
		case "agent", "key":
			if o.Org() != t.Counterparty && !isLocal(ctx, st, o) {
				continue
			}
		default:
			continue
		}
		objects = append(objects, o.Value())
		stored[o.ID()] = b
	}
	c := bundle.Contents{
		Manifest: bundle.Manifest{RulesVersion: record.RulesVersion, TransactionID: txn},
		Objects:  objects, Mandates: mandates, Keys: ks, Stored: stored,
	}
	return c, Summary{TransactionID: txn, Objects: len(objects), Events: events, Mandates: len(mandates), Keys: ks.Len()}, nil
}

// isLocal reports whether a key record is this instance's own (stored with
// origin local).
func isLocal(ctx context.Context, st *store.Store, o *object.View) bool {
	m, err := st.GetMandate(ctx, o.Mandate())
	return err == nil && m.Origin == "local"
}

// VerifyTransaction verifies this instance's own record of txn exactly as a
// third party would verify its export: the same contents, the seven steps,
// nothing consulted beyond them.
func VerifyTransaction(ctx context.Context, st *store.Store, txn string) (*verify.Report, error) {
	c, _, err := Collect(ctx, st, txn)
	if err != nil {
		return nil, err
	}
	return verify.Verify(verify.Input{Objects: c.Objects, Mandates: c.Mandates, Keys: c.Keys, TransactionID: txn},
		verify.Options{RulesVersion: c.Manifest.RulesVersion}), nil
}
