package record_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/store"
)

// The kill-point harness (issue: delivery that survives any crash). Every
// act and every receipt passes named kill points (before and after each
// commit, after a reply arrives, after it is stored: see the engine's
// point calls). The harness runs a flow once to learn the sequence of
// points each side passes, then, for every point of every side, runs the
// flow again on fresh instances and stops that side's engine dead at that
// point: a Crash panic, no deferred writes, its in-memory state thrown
// away. It then starts a new engine on the same state directory, lets the
// agent repeat the call it was making (with the same request_id, as an
// agent whose call broke does), runs both outbox workers, and checks that
// both records converge to the same events, each exactly once, both
// verifying with nothing failed and nothing not checkable, no fork, no
// message left waiting, within 5 seconds of (simulated) time.

// killer crashes its engine at the at-th kill point it reaches.
type killer struct {
	mu    sync.Mutex
	seen  []string
	at    int
	fired bool
}

func (k *killer) hit(point string) {
	k.mu.Lock()
	k.seen = append(k.seen, point)
	fire := !k.fired && len(k.seen)-1 == k.at
	if fire {
		k.fired = true
	}
	k.mu.Unlock()
	if fire {
		panic(recordtest.Crash{Point: point})
	}
}

func (k *killer) points() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.seen...)
}

// harness is two instances whose engines a test can crash and restart.
type harness struct {
	t       *testing.T
	b, s    *recordtest.Side
	c       *recordtest.Clock
	kb, ks  *killer
	crashed map[*recordtest.Side]string
	armed   map[*recordtest.Side]*killer // the killer each side's engine reports to
	// options, when a flow's setup sets it (and arms both sides again),
	// adds to every engine the harness starts (a rail that fails).
	options func(sd *recordtest.Side, o *record.Options)
}

func newHarness(t *testing.T, b, s *recordtest.Side, c *recordtest.Clock, kb, ks *killer) *harness {
	h := &harness{t: t, b: b, s: s, c: c, kb: kb, ks: ks, crashed: map[*recordtest.Side]string{}, armed: map[*recordtest.Side]*killer{}}
	h.arm(b, kb)
	h.arm(s, ks)
	return h
}

func (h *harness) other(sd *recordtest.Side) *recordtest.Side {
	if sd == h.b {
		return h.s
	}
	return h.b
}

// arm gives sd a new engine that reports its kill points to k (nil: a
// restarted engine, which never crashes again).
func (h *harness) arm(sd *recordtest.Side, k *killer) {
	h.armed[sd] = k
	sd.Engine = recordtest.NewEngine(h.t, sd.Node, sd.Out, func(o *record.Options) {
		if k != nil {
			o.TestingOnlyKill = k.hit
		}
		if h.options != nil {
			h.options(sd, o)
		}
	})
	h.other(sd).Out.Reconnect(sd.Engine)
}

// do runs one call of the agent of sd; a crash of either engine on the
// way is noted, not fatal.
func (h *harness) do(sd *recordtest.Side, call func() (record.Outcome, error)) (out record.Outcome, err error, crashed bool) {
	defer func() {
		if p := recover(); p != nil {
			c, ok := p.(recordtest.Crash)
			if !ok {
				panic(p)
			}
			h.crashed[sd] = c.Point
			crashed = true
		}
	}()
	out, err = call()
	if sd.Out.PeerCrashed() {
		h.crashed[h.other(sd)] = "receiving"
	}
	return out, err, false
}

// settle restarts every crashed engine and runs both outbox workers until
// nothing waits, advancing the simulated clock by the back-off that
// delivery asks for. It returns the simulated time it took.
func (h *harness) settle(ctx context.Context) time.Duration {
	h.t.Helper()
	start := h.c.Now()
	for round := 0; round < 50; round++ {
		for sd := range h.crashed {
			h.arm(sd, nil)
			sd.Engine.Resume(ctx)
			delete(h.crashed, sd)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					// A side's own worker may reach its kill point here (an
					// act the instance takes by itself, after a principal
					// released it); an engine restarted once never crashes.
					c, ok := p.(recordtest.Crash)
					for _, sd := range []*recordtest.Side{h.b, h.s} {
						if k := h.armed[sd]; ok && k != nil && k.fired {
							h.crashed[sd] = c.Point
							h.armed[sd] = nil
							return
						}
					}
					h.t.Fatalf("an engine crashed twice: %v", p)
				}
			}()
			recordtest.Flush(ctx, h.b, h.s)
			h.b.Engine.WorkSettlements(ctx)
			h.s.Engine.WorkSettlements(ctx)
			recordtest.Flush(ctx, h.b, h.s)
		}()
		for _, sd := range []*recordtest.Side{h.b, h.s} {
			if sd.Out.PeerCrashed() {
				h.crashed[h.other(sd)] = "receiving"
			}
		}
		if h.waiting(h.b) && h.waiting(h.s) && len(h.crashed) == 0 && !h.railWork() {
			return h.c.Now().Sub(start)
		}
		h.c.Add(time.Second)
	}
	h.t.Fatalf("the records did not settle: %d and %d messages wait", len(h.b.Pending(h.t)), len(h.s.Pending(h.t)))
	return 0
}

// waiting reports whether nothing of sd's waits to be delivered, but what
// its counterparty holds for its principal's approval while the principal
// has yet to decide (a flow's next step is the principal's).
func (h *harness) waiting(sd *recordtest.Side) bool {
	undecided := false
	if list, err := h.other(sd).Princ.Approvals(context.Background(), true); err == nil {
		undecided = len(list) > 0
	}
	for _, m := range sd.Pending(h.t) {
		if !undecided || !strings.Contains(m.LastError, string(reason.ApprovalRequired)) {
			return false
		}
	}
	return true
}

// railWork reports whether a payment still waits for its rail's answer.
func (h *harness) railWork() bool {
	due, err := h.b.Node.Org.Store.DueSettlements(context.Background(), h.c.Now().Add(24*time.Hour))
	for _, s := range due {
		if s.State != store.SettlementSucceeded { // a confirmation moves no money
			return true
		}
	}
	return err != nil
}

// step is one call an agent makes in a flow: the side that makes it, and
// the call, made idempotent by a fixed request id.
type step struct {
	name string
	side func(h *harness) *recordtest.Side
	call func(ctx context.Context, h *harness) (record.Outcome, error)
	// done reads what the flow needs from the call's outcome (the first
	// call's, or, after a crash, the repeated call's answer).
	done func(out record.Outcome)
}

// run plays the flow's steps, repeating a step whose call broke (after
// the crashed engine restarted), and settles at the end.
func (h *harness) run(ctx context.Context, steps []step) time.Duration {
	h.t.Helper()
	var recovery time.Duration
	for _, st := range steps {
		sd := st.side(h)
		for attempt := 0; ; attempt++ {
			if attempt > 2 {
				h.t.Fatalf("%s kept failing", st.name)
			}
			args := canonical.SHA256Hex([]byte(st.name))
			out, err, crashed := h.do(sd, func() (record.Outcome, error) {
				return sd.Engine.Idempotent(ctx, st.name, "req-"+st.name, args, func(ctx context.Context) (record.Outcome, error) { return st.call(ctx, h) })
			})
			if len(h.crashed) > 0 || crashed {
				recovery = max(recovery, h.settle(ctx))
				continue // the agent repeats the call that broke
			}
			if err != nil {
				h.t.Fatalf("%s: %v", st.name, err)
			}
			if st.done != nil {
				st.done(out)
			}
			break
		}
	}
	return max(recovery, h.settle(ctx))
}

// converged checks both records: the same events of the given types, each
// once, byte-identical and countersigned, no fork, both verifying clean.
func (h *harness) converged(txn string, want []string) {
	h.t.Helper()
	ctx := context.Background()
	types := recordtest.SameRecord(h.t, h.b, h.s, txn, len(want))
	if !slices.Equal(types, want) {
		h.t.Fatalf("events %v, want %v", types, want)
	}
	for _, sd := range []*recordtest.Side{h.b, h.s} {
		if forks, _ := sd.Node.Org.Store.Forks(ctx, txn); len(forks) != 0 {
			h.t.Fatalf("%s holds a fork", sd.Node.Org.Config().OrganizationID)
		}
		if p := sd.Pending(h.t); len(p) != 0 {
			h.t.Fatalf("%s still has %d messages waiting", sd.Node.Org.Config().OrganizationID, len(p))
		}
		verifiesClean(h.t, sd, txn)
	}
}

// flow is one flow of the matrix: how to reach its start, its steps, and
// the record it must end with.
type flow struct {
	name  string
	setup func(t *testing.T, h *harness) string // returns the transaction id
	steps []step
	want  []string
	// check, when set, checks what the events do not show (an obligation
	// waived by an act that appends none), on both sides.
	check func(t *testing.T, h *harness, txn string)
}

var (
	buyerSide    = func(h *harness) *recordtest.Side { return h.b }
	supplierSide = func(h *harness) *recordtest.Side { return h.s }
)

func crashFlows() []flow {
	var txn, obl string
	formation := formationFlow("formation", false)
	obligations := flow{
		name: "obligations",
		setup: func(t *testing.T, h *harness) string {
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			return txn
		},
		steps: []step{
			{"issue_obligation", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.IssueObligation(ctx, h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			}, func(out record.Outcome) { obl = out.Objects["obligation"] }},
			{"assert_performance", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.AssertPerformance(ctx, h.s.Actor(), record.AssertInput{MandateID: h.s.Mandate, ObligationID: obligationOf(h, txn, obl), Evidence: evidence("certificates")})
			}, nil},
			{"respond_to_assertion", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.Respond(ctx, h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obligationOf(h, txn, obl), ResponseType: "accept", AcceptedQuantity: "15"})
			}, nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted"},
	}
	settlement := flow{
		name: "settlement",
		setup: func(t *testing.T, h *harness) string {
			txn = recordtest.Form(t, h.b, h.s, "3200.00")
			out, err := h.b.Engine.IssueObligation(context.Background(), h.b.Actor(), record.ObligationInput{MandateID: h.b.Mandate, TransactionID: txn})
			if err != nil {
				t.Fatal(err)
			}
			obl = out.Objects["obligation"]
			assertPerformance(t, h.s, obl, "20")
			if _, err := h.b.Engine.Respond(context.Background(), h.b.Actor(), record.RespondInput{MandateID: h.b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil {
				t.Fatal(err)
			}
			return txn
		},
		steps: []step{
			{"instruct_settlement", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.b.Engine.InstructSettlement(ctx, h.b.Actor(), record.InstructInput{MandateID: h.b.Mandate, ObligationID: obl, Rail: "rail_test_sandbox", IdempotencyKey: "pay-crash-000001"})
			}, nil},
			{"settle_rail", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				// What the settlement worker does: the rail work that is due.
				h.b.Engine.WorkSettlements(ctx)
				return record.Outcome{}, nil
			}, nil},
			{"complete_transaction", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				return h.s.Engine.CompleteTransaction(ctx, h.s.Actor(), record.CompleteInput{MandateID: h.s.Mandate, TransactionID: txn})
			}, nil},
		},
		want: []string{"agreement.direct", "agreement.committed", "obligation.activated", "performance.declared", "acceptance.granted", "settlement.instructed", "transaction.completed"},
		// Wherever the power was cut, the recorded instruction is the
		// buyer's one payment towards the supplier (record/budgets.go).
		check: func(t *testing.T, h *harness, txn string) {
			paid, n, err := h.b.Node.Org.Store.BudgetReader(context.Background()).Paid("EUR", "org_delta", time.Unix(0, 0), h.c.Now().Add(time.Hour))
			if err != nil || n != 1 || paid.String() != "3200.00" {
				t.Fatalf("the buyer's payments: %d of %v in all (%v), want one of 3200.00", n, paid, err)
			}
		},
	}
	var signer string
	held := flow{
		name: "formation-held",
		setup: func(t *testing.T, h *harness) string {
			var err error
			if txn, err = envelope.NewID("txn"); err != nil {
				t.Fatal(err)
			}
			signer = tradingMandate(t, h.s, "org_northstar", []string{"offer.submit", "agreement.sign"}, ruleOn("agreement.sign", "org_delta"))
			return txn
		},
		steps: append(formationSteps(&txn, &signer),
			step{"approve_signature", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
				// The supplier's principal approves the signature its rule
				// held; the acceptor's next attempt is then due.
				list := pendingRequests(h.t, h.s, "agreement.sign")
				if len(list) != 1 {
					h.t.Fatalf("the supplier's principal sees %d requests", len(list))
				}
				if _, err := h.s.Princ.Decide(ctx, list[0].RequestID, true, nil); err != nil {
					return record.Outcome{}, err
				}
				for _, m := range h.b.Pending(h.t) {
					if d := m.NextAttempt.Sub(h.c.Now()); d > 0 {
						h.c.Add(d)
					}
				}
				return record.Outcome{}, nil
			}, nil}),
		want: []string{"agreement.direct", "agreement.committed"},
	}
	return slices.Concat([]flow{formation, formationFlow("formation-separate-agreement", true), obligations, settlement, held}, lifecycleFlows(), disputeFlows(), moneyFlows(), deadlineFlows())
}

// formationFlow is formation, offer to committed. separate has the offeree
// propose its agreement in a write of its own after storing the reply to
// its acceptance: what a database left by a build before the follow-on
// (proposedWith) resumes with, and what a failed draft falls back to.
func formationFlow(name string, separate bool) flow {
	var txn string
	return flow{
		name: name,
		setup: func(t *testing.T, h *harness) string {
			if separate {
				h.options = func(sd *recordtest.Side, o *record.Options) { o.TestingOnlySeparateAgreement = sd == h.b }
				h.arm(h.b, h.kb)
			}
			var err error
			txn, err = envelope.NewID("txn")
			if err != nil {
				t.Fatal(err)
			}
			return txn
		},
		steps: formationSteps(&txn, nil),
		want:  []string{"agreement.direct", "agreement.committed"},
		// Wherever the power was cut, the buyer's budgets count the
		// commitment its recorded acceptance made (record/budgets.go).
		check: func(t *testing.T, h *harness, txn string) {
			got, err := h.b.Node.Org.Store.Committed(context.Background(), txn, "EUR")
			if err != nil || got.String() != "3200.00" {
				t.Fatalf("the buyer's commitment in %s: %s %v, want 3200.00", txn, got, err)
			}
		},
	}
}

// formationSteps are formation's two calls in transaction *txn: the
// supplier's offer under *mandate (nil: its trading mandate) and the
// buyer's acceptance, with the approval its mandate asks for.
func formationSteps(txn, mandate *string) []step {
	var offer, approval string
	return []step{
		{"propose_offer", supplierSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
			m := h.s.Mandate
			if mandate != nil {
				m = *mandate
			}
			return h.s.Engine.ProposeOffer(ctx, h.s.Actor(), record.OfferInput{MandateID: m, Counterparty: "org_northstar", Terms: recordtest.Terms("3200.00"),
				ValidUntil: envelope.Timestamp(h.c.Now().Add(24 * time.Hour)), TransactionID: *txn})
		}, func(out record.Outcome) { offer = out.Objects["offer"] }},
		{"accept_offer", buyerSide, func(ctx context.Context, h *harness) (record.Outcome, error) {
			if approval == "" {
				approval = recordtest.Approve(h.t, h.b, offer)
			}
			return h.b.Engine.AcceptOffer(ctx, h.b.Actor(), record.AcceptInput{MandateID: h.b.Mandate, OfferID: offer, ApprovalID: approval})
		}, nil},
	}
}

// obligationOf is the obligation the flow issued, read from the record
// when the issuing call's outcome was lost in a crash.
func obligationOf(h *harness, txn, known string) string {
	if known != "" {
		return known
	}
	v, err := h.b.Engine.Transaction(context.Background(), txn)
	if err != nil || len(v.Obligations) == 0 {
		h.t.Fatalf("no obligation recorded: %v", err)
	}
	return v.Obligations[0].ObligationID
}

// matrixRaceStride: under -race, TestKillPointMatrix runs one kill point
// in this many (see there).
const matrixRaceStride = 5

func TestKillPointMatrix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, f := range crashFlows() {
		// The dry run: which points each side passes, in order.
		b, s, c := recordtest.Pair(t)
		kb, ks := &killer{at: -1}, &killer{at: -1}
		h := newHarness(t, b, s, c, kb, ks)
		txn := f.setup(t, h)
		kb.seen, ks.seen = nil, nil
		h.run(ctx, f.steps)
		h.converged(txn, f.want)
		if f.check != nil {
			f.check(t, h, txn)
		}
		points := map[string][]string{"buyer": kb.points(), "supplier": ks.points()}
		for _, who := range []string{"buyer", "supplier"} {
			if len(points[who]) == 0 {
				t.Fatalf("%s: the %s passed no kill point", f.name, who)
			}
			sampled := func(i int) bool { return (i+len(f.name)+len(who))%matrixRaceStride == 0 }
			// A flow's side with fewer points than the stride may have
			// none sampled: its first point runs then.
			noneSampled := true
			for i := range points[who] {
				if sampled(i) {
					noneSampled = false
				}
			}
			for i, p := range points[who] {
				if raceEnabled && os.Getenv("PARTY_FULL_MATRIX") == "" && !sampled(i) && !(noneSampled && i == 0) {
					// Under -race each point costs about five times as
					// much; a fifth of them, at least one of every flow's
					// side, still looks for races in recovery. The whole
					// matrix runs without -race (.ci/run runs it so) or
					// with PARTY_FULL_MATRIX=1.
					continue
				}
				name := fmt.Sprintf("%s/%s/%02d-%s", f.name, who, i, p)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					b, s, c := recordtest.Pair(t)
					var kb, ks *killer
					switch who {
					case "buyer":
						kb, ks = &killer{at: -1}, &killer{at: -1}
					default:
						kb, ks = &killer{at: -1}, &killer{at: -1}
					}
					h := newHarness(t, b, s, c, kb, ks)
					flows := crashFlows()
					var fl flow
					for _, x := range flows {
						if x.name == f.name {
							fl = x
						}
					}
					txn := fl.setup(t, h)
					// Arm the kill only once the setup is done.
					k := kb
					if who == "supplier" {
						k = ks
					}
					k.mu.Lock()
					k.seen, k.at = nil, i
					k.mu.Unlock()
					other := ks
					if who == "supplier" {
						other = kb
					}
					other.mu.Lock()
					other.seen = nil
					other.mu.Unlock()
					start := time.Now()
					simulated := h.run(ctx, fl.steps)
					if !k.fired {
						t.Fatalf("the kill point %s (#%d) was never reached", p, i)
					}
					h.converged(txn, fl.want)
					if fl.check != nil {
						fl.check(t, h, txn)
					}
					if fl.name == "settlement" {
						// A crash between the rail call and the receipt asks the
						// rail again under the same key: money moves once.
						if n := sandbox(t, h.b).Executions("pay-crash-000001"); n != 1 {
							t.Fatalf("the rail moved money %d times", n)
						}
					}
					if simulated > 5*time.Second || time.Since(start) > 5*time.Second {
						t.Fatalf("recovery took %s simulated, %s real; want under 5s", simulated, time.Since(start))
					}
				})
			}
		}
	}
}

// TestPeerDownFiveMinutes: an act made while the counterparty is
// unreachable for five minutes waits in the outbox, its decision goes
// stale, and once the peer answers the act is renewed with a fresh
// decision and recorded, with no call from the agent.
func TestPeerDownFiveMinutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, s, c := recordtest.Pair(t)
	o := recordtest.Offer(t, s, "3200.00")
	apr := recordtest.Approve(t, b, o.Objects["offer"])
	b.Out.SetDown(true)
	out, err := b.Engine.AcceptOffer(ctx, b.Actor(), record.AcceptInput{MandateID: b.Mandate, OfferID: o.Objects["offer"], ApprovalID: apr})
	if err != nil || out.Status != record.StatusPending {
		t.Fatalf("accept while the supplier is down: %+v %v", out, err)
	}
	first := b.Pending(t)[0]
	for elapsed := time.Duration(0); elapsed < 5*time.Minute; elapsed += 10 * time.Second {
		c.Add(10 * time.Second)
		recordtest.Flush(ctx, b, s)
	}
	if p := b.Pending(t); len(p) != 1 || p[0].Attempts < 5 {
		t.Fatalf("after five minutes down: %+v", p)
	}
	b.Out.SetDown(false)
	for i := 0; i < 20 && (len(b.Pending(t)) > 0 || len(s.Pending(t)) > 0); i++ {
		c.Add(time.Second)
		recordtest.Flush(ctx, b, s)
	}
	recordtest.SameRecord(t, b, s, o.TransactionID, 2)
	evs, _ := b.Node.Org.Store.Events(ctx, o.TransactionID)
	if strings.Contains(string(first.Objects[len(first.Objects)-1]), evs[0].EventID) {
		t.Fatal("the stale event went through: it should have been renewed")
	}
	for _, sd := range []*recordtest.Side{b, s} {
		verifiesClean(t, sd, o.TransactionID)
	}
}
