package record_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

// TestWorkingSetDoesNotGrowWithRounds: the countersigner checks an act
// against a working set bounded by the act, not by how long the
// transaction ran (issue 13). After 2 and after 22 rounds of assertion and
// rejection, the obligor's next assertion is checked, on both sides, over
// working sets of the same sizes.
func TestWorkingSetDoesNotGrowWithRounds(t *testing.T) {
	ctx := context.Background()
	b, s, _, txn, obl := committed(t)
	var mu sync.Mutex
	var sizes []int
	stop := record.ObserveWorkingSets(func(id string, n, _ int) {
		if id == txn {
			mu.Lock()
			sizes = append(sizes, n)
			mu.Unlock()
		}
	})
	defer stop()
	round := 0
	assert := func() {
		t.Helper()
		round++
		if _, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence(fmt.Sprintf("certificates, round %d", round))}); err != nil {
			t.Fatal(err)
		}
	}
	rounds := func(n int) {
		t.Helper()
		for range n {
			assert()
			if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure := func() []int {
		t.Helper()
		mu.Lock()
		sizes = nil
		mu.Unlock()
		assert()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
	rounds(2)
	early := measure()
	if _, err := b.Engine.Respond(ctx, b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "reject", ReasonCode: "evidence_insufficient"}); err != nil {
		t.Fatal(err)
	}
	rounds(20)
	late := measure()
	if len(early) == 0 || !slices.Equal(early, late) {
		t.Fatalf("working sets of the assertion after 2 rounds %v, after 22 rounds %v", early, late)
	}
}

// TestWorkingSetHoldsOnlyTheTransactionsParties: the mandates and key
// records a working set carries are those of the act, not all an instance
// holds. Mandates accumulate (one per transaction, as the demo issues
// them) and so do counterparties; after either side issues five more
// mandates, and both hold a third organisation's key records and a
// mandate of it, the same acts on a fresh transaction (an obligation the
// supplier countersigns, an assertion the buyer does) are checked over
// working sets of the same sizes, and they still verify.
func TestWorkingSetHoldsOnlyTheTransactionsParties(t *testing.T) {
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	type size struct{ n, mandates int }
	var mu sync.Mutex
	var sizes []size
	stop := record.ObserveWorkingSets(func(_ string, n, mandates int) {
		mu.Lock()
		sizes = append(sizes, size{n, mandates})
		mu.Unlock()
	})
	defer stop()
	measure := func() []size {
		t.Helper()
		txn := recordtest.Form(t, b, s, "3200.00")
		mu.Lock()
		sizes = nil
		mu.Unlock()
		out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Engine.AssertPerformance(ctx, s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: out.Objects["obligation"], Evidence: evidence("certificates")}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
	before := measure()

	for _, sd := range []*recordtest.Side{b, s} {
		for i := range 5 {
			if _, err := sd.Princ.IssueMandate(ctx, authority.IssueRequest{
				ValidFrom: envelope.Timestamp(c.Now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)),
				Actions:       []string{"offer.submit"},
				Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{fmt.Sprintf("org_other%d", i)}},
				SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "10.00"},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	third := orgtest.New(t, "org_third", c.Now, false)
	krs, err := third.Org.Store.ObjectsOfType(ctx, "key_record")
	if err != nil || len(krs) == 0 {
		t.Fatalf("the third organisation's key records: %d, %v", len(krs), err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		for _, kr := range krs {
			if _, err := sd.Node.Org.Store.PutObject(ctx, kr, "org_third"); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := third.Principal(t).IssueMandate(ctx, authority.IssueRequest{
		ValidFrom: envelope.Timestamp(c.Now().Add(-time.Minute)), ValidUntil: envelope.Timestamp(c.Now().Add(24 * time.Hour)),
		Actions:       []string{"offer.submit"},
		Scope:         map[string]any{"categories": []any{"services.calibration"}, "counterparty_organization_ids": []any{"org_northstar"}},
		SpendingLimit: &authority.SpendingLimit{Currency: "EUR", Amount: "10.00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := canonical.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, sd := range []*recordtest.Side{b, s} {
		if err := sd.Node.Org.Store.PutMandate(ctx, body, "org_third"); err != nil {
			t.Fatal(err)
		}
	}

	after := measure()
	if len(before) == 0 || !slices.Equal(before, after) {
		t.Fatalf("working sets (objects, mandates) of an obligation and an assertion: %v before, %v with more mandates and a third organisation held", before, after)
	}
	for _, sz := range before {
		if sz.mandates == 0 {
			t.Fatalf("a working set without mandates: %v", before)
		}
	}
}
