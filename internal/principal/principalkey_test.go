package principal_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// TestPrincipalRotationStoppedAtEveryStep stops a principal key rotation
// after each of its steps, as a crash would, then reopens the state
// directory and rotates again. Whatever the stop, the instance and the
// principal's surface open, the second rotation succeeds, and the end
// state is whole: one principal key active, every other expired, pinned in
// peer.json and its file deleted, and no active mandate issued by a
// retired key.
func TestPrincipalRotationStoppedAtEveryStep(t *testing.T) {
	ctx := context.Background()
	for _, step := range []string{"key-written", "record-stored", "config-switched", "retired", "reissued"} {
		t.Run(step, func(t *testing.T) {
			var mu sync.Mutex
			at := time.Now().UTC()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
			advance := func(d time.Duration) { mu.Lock(); at = at.Add(d); mu.Unlock() }
			n := orgtest.New(t, "org_acme", clock, false)
			p := n.Principal(t)
			if _, err := p.IssueMandate(ctx, request(at, "")); err != nil {
				t.Fatal(err)
			}
			crash := errors.New("stopped at " + step)
			restore := principal.SetStopRotation(func(s string) error {
				if s == step {
					return crash
				}
				return nil
			})
			_, err := p.RotatePrincipalKey(ctx, false, "")
			restore()
			if !errors.Is(err, crash) {
				t.Fatalf("the stopped rotation: %v", err)
			}

			advance(2 * time.Second)
			o, err := org.Open(n.Dir, org.Options{Clock: clock})
			if err != nil {
				t.Fatalf("reopening after a stop at %s: %v", step, err)
			}
			defer o.Close()
			p2, err := principal.Open(o)
			if err != nil {
				t.Fatalf("the principal after a stop at %s: %v", step, err)
			}
			rot, err := p2.RotatePrincipalKey(ctx, false, "")
			if err != nil {
				t.Fatalf("rotating again after a stop at %s: %v", step, err)
			}
			advance(5 * time.Second)

			cfg := o.Config()
			if cfg.PrincipalKeyID != rot.NewKeyID {
				t.Fatalf("config names %s, the rotation made %s", cfg.PrincipalKeyID, rot.NewKeyID)
			}
			pf, err := os.ReadFile(filepath.Join(n.Dir, instance.PeerFile))
			if err != nil {
				t.Fatal(err)
			}
			own, err := instance.ParsePeerFile(pf)
			if err != nil {
				t.Fatal(err)
			}
			principals := principalKeys(t, o)
			if len(principals) < 2 {
				t.Fatalf("%d principal keys", len(principals))
			}
			for _, kid := range principals {
				k, err := o.ResolveKey(ctx, kid)
				if err != nil {
					t.Fatal(err)
				}
				want, file := "expired", instance.PrincipalKeyFileFor(kid)
				if kid == cfg.PrincipalKeyID {
					want = envelope.KeyActive
				}
				if k.Status != want {
					t.Errorf("principal key %s is %s, want %s", kid, k.Status, want)
				}
				if _, pinned := own.PrincipalKeys[kid]; !pinned {
					t.Errorf("peer.json does not pin %s", kid)
				}
				if _, err := os.Stat(filepath.Join(n.Dir, filepath.FromSlash(file))); (err == nil) != (kid == cfg.PrincipalKeyID) {
					t.Errorf("key file of %s (current %v): %v", kid, kid == cfg.PrincipalKeyID, err)
				}
			}
			if _, err := os.Stat(filepath.Join(n.Dir, filepath.FromSlash(instance.PrincipalKeyFile))); !os.IsNotExist(err) {
				t.Errorf("the first principal key file remains: %v", err)
			}
			// No private key file but the current one, not even the one a
			// rotation stopped before its key record wrote.
			files, _ := filepath.Glob(filepath.Join(n.Dir, "keys", "principal*.pem"))
			if len(files) != 1 || filepath.Base(files[0]) != filepath.Base(instance.PrincipalKeyFileFor(cfg.PrincipalKeyID)) {
				t.Errorf("principal key files left: %v", files)
			}
			ms, err := o.Store.Mandates(ctx, "local")
			if err != nil {
				t.Fatal(err)
			}
			active := 0
			for _, m := range ms {
				doc, _ := canonical.DecodeObject(m.Body)
				if m.Status != store.StatusActive || instance.IsInstanceMandate(doc) {
					continue
				}
				active++
				if iss := doc["issuer"].(map[string]any); iss["key_id"] != cfg.PrincipalKeyID {
					t.Errorf("active mandate %s is issued by %v", m.ID, iss["key_id"])
				}
			}
			if active != 1 {
				t.Errorf("%d active trading mandates, want the one, reissued", active)
			}
		})
	}
}

// principalKeys are the ids of the organisation's principal keys: its
// self-signed key records.
func principalKeys(t *testing.T, o *org.Org) []string {
	t.Helper()
	raws, err := o.Store.ObjectsOfType(context.Background(), "key_record")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range raws {
		rec, _ := canonical.DecodeObject(b)
		for _, e := range rec["signatures"].([]any) {
			if e.(map[string]any)["key_id"] == rec["id"] {
				out = append(out, rec["id"].(string))
			}
		}
	}
	return out
}

// request is a plain trading mandate of the organisation's primary agent.
func request(now time.Time, id string) authority.IssueRequest {
	return authority.IssueRequest{
		MandateID:     id,
		ValidFrom:     envelope.Timestamp(now.Add(-time.Minute)),
		ValidUntil:    envelope.Timestamp(now.Add(24 * time.Hour)),
		Actions:       []string{"offer.accept"},
		Scope:         map[string]any{"categories": []any{"services.calibration"}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
	}
}

// TestSurfacePicksUpARotationElsewhere: the approvals page's surface
// (kept by `party serve`) signs with the new key once the CLI, another
// surface on the same state directory, rotated it.
func TestSurfacePicksUpARotationElsewhere(t *testing.T) {
	ctx := context.Background()
	n := orgtest.New(t, "org_acme", nil, false)
	served, cli := n.Principal(t), n.Principal(t)
	rot, err := cli.RotatePrincipalKey(ctx, false, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := served.IssueMandate(ctx, request(time.Now().UTC(), ""))
	if err != nil {
		t.Fatal(err)
	}
	if kid := m["issuer"].(map[string]any)["key_id"]; kid != rot.NewKeyID {
		t.Fatalf("the served surface issued under %v, not the new key %s", kid, rot.NewKeyID)
	}
	if proof := m["proof"].(map[string]any); proof["key_id"] != rot.NewKeyID {
		t.Fatalf("the proof names %v", proof["key_id"])
	}
}

// TestPrincipalRotationReissuesADelegatedChain: a parent and its child
// mandate, both issued under the old key, are issued again under the new
// one, the new child naming the new parent.
func TestPrincipalRotationReissuesADelegatedChain(t *testing.T) {
	ctx := context.Background()
	n := orgtest.New(t, "org_acme", nil, false)
	p := n.Principal(t)
	now := time.Now().UTC()
	preq := request(now, "")
	preq.Delegation = &authority.Delegation{Allowed: true, MaximumDepth: 1}
	parent, err := p.IssueMandate(ctx, preq)
	if err != nil {
		t.Fatal(err)
	}
	child := request(now, "")
	pid := parent["id"].(string)
	child.ParentMandateID = &pid
	child.SpendingLimit = &authority.SpendingLimit{Currency: "EUR", Amount: "1000.00"}
	c, err := p.IssueMandate(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	rot, err := p.RotatePrincipalKey(ctx, false, "")
	if err != nil {
		t.Fatal(err)
	}
	newParent, newChild := rot.Mandates[pid], rot.Mandates[c["id"].(string)]
	if newParent == "" || newChild == "" {
		t.Fatalf("reissued: %v", rot.Mandates)
	}
	rec, err := n.Org.Store.GetMandate(ctx, newChild)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := canonical.DecodeObject(rec.Body)
	if doc["parent_mandate_id"] != newParent || doc["issuer"].(map[string]any)["key_id"] != rot.NewKeyID {
		t.Fatalf("the new child names parent %v under key %v", doc["parent_mandate_id"], doc["issuer"].(map[string]any)["key_id"])
	}
}

// TestRunningInstanceSeesKeyRecordsWrittenElsewhere: a running instance
// keeps the key records it resolves keys from (org.Org.keyRecords) only
// while the store's key version stands, so a rotation the CLI makes in
// another process shows at its next resolution: the old key expired, the
// new one known.
func TestRunningInstanceSeesKeyRecordsWrittenElsewhere(t *testing.T) {
	ctx := context.Background()
	// The running instance reads status a little later than the rotation
	// happens: the old key is valid through the rotation's second.
	later := func() time.Time { return time.Now().Add(5 * time.Second) }
	n := orgtest.New(t, "org_acme", later, false)
	cfg := n.Org.Config()
	if k, err := n.Org.ResolveKey(ctx, cfg.AgentKeyID); err != nil || k.Status != envelope.KeyActive {
		t.Fatalf("before: %+v, %v", k, err)
	}
	cli, err := org.Open(n.Dir, org.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	p, err := principal.Open(cli)
	if err != nil {
		t.Fatal(err)
	}
	rot, err := p.RotateAgentKey(ctx, cfg.AgentID, false, "routine rotation")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := n.Org.ResolveKey(ctx, rot.OldKeyID); err != nil || k.Status != verify.KeyExpired {
		t.Fatalf("the old key after a rotation elsewhere: %+v, %v", k, err)
	}
	if k, err := n.Org.ResolveKey(ctx, rot.NewKeyID); err != nil || k.Status != envelope.KeyActive {
		t.Fatalf("the new key after a rotation elsewhere: %+v, %v", k, err)
	}
}
