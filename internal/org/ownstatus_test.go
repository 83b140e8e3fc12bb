package org_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/status"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// set moves the clock to t.
func (c *testClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// The evaluator resolves this organisation's own mandates from its record
// at each asking: no status endpoint is served here (a fetch would fail),
// and a change its principal makes from another runtime over the same
// database (another process) shows at once, through suspension,
// reinstatement, revocation; and expiry at the end of the validity
// interval. Neither reading is kept by the status client.
func TestOwnMandateStatusReadFromTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &testClock{t: time.Now().UTC().Truncate(time.Second)}
	n := orgtest.New(t, "org_northstar", c.now, false)
	c.set(time.Now().UTC().Truncate(time.Second)) // after Init: its keys are dated by the wall clock
	issue := func(until time.Duration) (string, string) {
		t.Helper()
		m, err := n.Principal(t).IssueMandate(ctx, authority.IssueRequest{
			ValidFrom: envelope.Timestamp(c.now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.now().Add(until)),
			Actions:       []string{"offer.accept"},
			Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{"org_delta"}},
			SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "4000.00"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return m["id"].(string), m["status_endpoint"].(string)
	}
	id, endpoint := issue(24 * time.Hour)
	other, err := org.Open(n.Dir, org.Options{Clock: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	elsewhere, err := principal.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	resolver := n.Org.Evaluator().Status
	uncached := n.Org.Evaluator().Uncached().Status
	want := func(what, st string) {
		t.Helper()
		for _, r := range []status.Resolver{resolver, uncached} {
			doc, err := r.Resolve(ctx, id, endpoint)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if doc.Status != st || doc.MandateID != id || doc.Usable(c.now()) != nil {
				t.Fatalf("%s: %+v, want %s", what, doc, st)
			}
		}
	}
	want("issued", status.Active)
	for _, step := range []struct {
		change func(context.Context, string, string) error
		st     string
	}{{elsewhere.Suspend, status.Suspended}, {elsewhere.Reinstate, status.Active}, {elsewhere.Revoke, status.Revoked}} {
		if err := step.change(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
		want("after the change to "+step.st, step.st)
	}

	id, endpoint = issue(time.Hour)
	want("a mandate valid for an hour", status.Active)
	c.add(time.Hour)
	want("at its valid_until", status.Expired)

	// A mandate not this instance's own is the status client's: with no
	// endpoint serving it, unresolved.
	if _, err := resolver.Resolve(ctx, "mnd_0123456789abcdef01234567", "https://127.0.0.1:1/v1/mandates/mnd_0123456789abcdef01234567/status"); !slices.Contains(reason.CodesOf(err), reason.MandateStatusUnresolved) {
		t.Fatalf("a mandate held nowhere here: %v", err)
	}
}
