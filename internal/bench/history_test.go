package bench

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/partyd/party/internal/admin"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/budget"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/history"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/principal"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

var (
	historySizes   = flag.String("history.sizes", "10000,100000", "the sizes BenchmarkHistory compares with 10 transactions, comma-separated")
	historyMillion = flag.Bool("history.million", false, "BenchmarkHistory also at 1 000 000 transactions (some 80 GB of disk for the two instances, an hour to generate)")
	historyBuyer   = flag.Bool("history.buyer-only", false, "the pairs of -history.sizes hold their history on the buyer's side only (half the disk: 1 000 000 is some 40 GB)")
	historyRounds  = flag.Int("history.rounds", 1, "how many runs BenchmarkHistory makes on each history it generates, each after the first beside a new pair of 10 (-count generates the histories again)")
)

// BenchmarkHistory measures what a long history costs the acts and reads
// a person and an agent make every day: each on a pair of instances that
// holds 10 transactions and on one that holds N, alternately
// (alternate), N = 10 000 and 100 000 (-history.sizes), and 1 000 000
// with -history.million. The histories are generated (package history,
// its default mix: completed, committed, in performance, open offers,
// disputed, terminated), every transaction a valid record. See
// docs/performance.md, "A year of history".
//
//	TMPDIR=/var/tmp go test -run '^$' -bench History -benchtime 20x -timeout 2h ./internal/bench
//
// TMPDIR must name a disk, not a RAM disk, past 10 000: 100 000
// transactions are some 8 GB on the two instances. With
// -history.buyer-only the supplier of the large pair holds only the
// templates: what is measured is then the buyer's instance at N (every
// read, and the buyer's side of each act) beside a supplier at 10.
//
//	TMPDIR=/var/tmp go test -run '^$' -bench History -benchtime 10x -timeout 4h ./internal/bench -history.sizes=1000000 -history.buyer-only
//
// -history.rounds=R runs the acts R times on each history generated:
// R runs for one generation, where -count generates each history again
// (52 minutes at 1 000 000). The first round runs beside the pair of 10
// every size shares, each later one beside a new pair of 10.
func BenchmarkHistory(b *testing.B) {
	sizes, err := historySizeList()
	if err != nil {
		b.Fatal(err)
	}
	small := newHistoryPair(b, 10)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("txns=%d", n), func(b *testing.B) {
			large := newHistoryPair(b, n)
			if *historyRounds <= 1 {
				alternate(b, [2]int{10, n}, [2]*growthPair{small, large}, historyActs)
				return
			}
			for r := range *historyRounds {
				b.Run(fmt.Sprintf("round=%d", r+1), func(b *testing.B) {
					// A new pair of 10 after the first round: the acts add
					// some 70 transactions a round to the pair they run on.
					s := small
					if r > 0 {
						s = newHistoryPair(b, 10)
					}
					alternate(b, [2]int{10, n}, [2]*growthPair{s, large}, historyActs)
				})
			}
		})
	}
}

// historySizeList is -history.sizes, and 1 000 000 with -history.million.
func historySizeList() ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(*historySizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10 {
			return nil, fmt.Errorf("-history.sizes: %q", f)
		}
		sizes = append(sizes, n)
	}
	if *historyMillion {
		sizes = append(sizes, 1000000)
	}
	return sizes, nil
}

// newHistoryPair is a pair holding n transactions of the default mix, one
// of them a completed transaction traded on it (its timeline, export and
// bundle are measured).
func newHistoryPair(b *testing.B, n int) *growthPair {
	b.Helper()
	bs, ss, c := recordtest.Pair(b)
	p := &growthPair{b: bs, s: ss, c: c}
	src := history.Trade(b, bs, ss, c)
	if *historyBuyer && n > 10 {
		src = src.BuyerOnly()
	}
	if _, err := src.Generate(context.Background(), n-len(history.DefaultMix), history.DefaultMix); err != nil {
		b.Fatal(err)
	}
	// The buyer's budgets, as an organisation that trades all day sets
	// them: a month's spend and exposure, high enough never to stop an
	// act, so that each act that commits to pay reads them (the
	// generated commitments all lie in this month).
	for _, k := range []budget.Kind{budget.Spend, budget.Exposure} {
		bu, err := budget.New("monthly-"+string(k), k, budget.Month, "EUR", "1000000000000.00", "", "", "")
		if err == nil {
			err = bs.Node.Org.Store.PutBudget(context.Background(), bu)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	p.done = recordtest.Form(b, bs, ss, "3200.00")
	recordtest.Complete(b, bs, ss, p.done)
	recordtest.Flush(context.Background(), bs, ss)
	p.bundle = b.TempDir()
	if _, err := export.Write(context.Background(), bs.Node.Org.Store, p.done, p.bundle, export.Options{}); err != nil {
		b.Fatal(err)
	}
	p.admin = admin.Handler(bs.Princ, "bench-admin-token", nil, nil, admin.WithRecord(bs.Engine))
	return p
}

// pageLen is the page BenchmarkHistory lists: one the pair of 10 fills.
const pageLen = 10

// historyActs are what BenchmarkHistory measures.
var historyActs = []growthAct{
	{"propose_offer", func(b *testing.B, p *growthPair) func() error {
		return func() error {
			_, err := p.s.Engine.ProposeOffer(context.Background(), p.s.Actor(), p.offerInput())
			return err
		}
	}},
	{"accept_offer", acceptOffer},
	{"issue_obligation", issueObligation},
	{"instruct_settlement", func(b *testing.B, p *growthPair) func() error {
		obl := acceptedObligation(b, p)
		return func() error {
			out, err := p.b.Engine.InstructSettlement(context.Background(), p.b.Actor(), record.InstructInput{MandateID: p.b.Mandate, ObligationID: obl,
				Rail: "rail_test_sandbox", IdempotencyKey: "pay-" + obl})
			if err == nil && len(out.Objects["settlement_instruction"]) == 0 {
				err = fmt.Errorf("instruct_settlement: %+v", out)
			}
			return err
		}
	}},
	// The agent's request_approval of an offer's acceptance, held by its
	// mandate; the request the act before left is rejected untimed first,
	// so that pending requests do not pile up on the pair that runs more
	// rounds (the approvals page shows every one).
	{"request_approval", func(b *testing.B, p *growthPair) func() error {
		if p.pending != "" {
			if _, err := p.b.Princ.Decide(context.Background(), p.pending, false, nil); err != nil {
				b.Fatal(err)
			}
			p.pending = ""
		}
		act := acceptanceAct(b, p)
		return func() error {
			r, err := p.b.Agent.RequestApproval(context.Background(), agent.VerifyInput{MandateID: p.b.Mandate, ProposedAction: act})
			if err == nil && r.Status != store.ApprovalPending {
				err = fmt.Errorf("request_approval: %+v", r)
			}
			p.pending = r.ApprovalRequestID
			return err
		}
	}},
	// The principal's approval of a request (the approvals page's
	// decision): the signed approval object stored, the request decided.
	{"approve", func(b *testing.B, p *growthPair) func() error {
		act := acceptanceAct(b, p)
		r, err := p.b.Agent.RequestApproval(context.Background(), agent.VerifyInput{MandateID: p.b.Mandate, ProposedAction: act})
		if err != nil {
			b.Fatal(err)
		}
		return func() error {
			_, err := p.b.Princ.Decide(context.Background(), r.ApprovalRequestID, true, nil)
			return err
		}
	}},
	// Pages of pageLen on both sizes: the small pair holds little more.
	{"list_transactions", func(b *testing.B, p *growthPair) func() error {
		return func() error {
			page, err := p.b.Engine.ListTransactions(context.Background(), readmodel.ListFilter{Limit: pageLen})
			if err == nil && len(page.Transactions) != pageLen {
				err = fmt.Errorf("list_transactions: a page of %d", len(page.Transactions))
			}
			return err
		}
	}},
	{"list_inbox", func(b *testing.B, p *growthPair) func() error {
		// A full page waits: the supplier's open offers topped up.
		for {
			items, err := p.b.Engine.Inbox(context.Background(), p.b.Actor(), p.b.Mandate, pageLen)
			if err != nil {
				b.Fatal(err)
			}
			if len(items) == pageLen {
				break
			}
			if _, err := p.s.Engine.ProposeOffer(context.Background(), p.s.Actor(), p.offerInput()); err != nil {
				b.Fatal(err)
			}
		}
		return func() error {
			items, err := p.b.Engine.Inbox(context.Background(), p.b.Actor(), p.b.Mandate, pageLen)
			if err == nil && len(items) != pageLen {
				err = fmt.Errorf("list_inbox: a page of %d", len(items))
			}
			return err
		}
	}},
	{"approvals_page", func(b *testing.B, p *growthPair) func() error {
		// The page shows the latest DecidedShown decisions: the pair of
		// 10 is topped up to as many, so that both pages show the same.
		for {
			shown, err := p.b.Node.Org.Store.ApprovalRequestsShown(context.Background(), principal.DecidedShown)
			if err != nil {
				b.Fatal(err)
			}
			if len(shown) >= principal.DecidedShown {
				break
			}
			recordtest.Approve(b, p.b, recordtest.Offer(b, p.s, "3200.00").Objects["offer"])
		}
		return func() error { return p.get("/") }
	}},
	{"timeline", func(b *testing.B, p *growthPair) func() error {
		return func() error { return p.get("/transactions/" + p.done) }
	}},
	{"export", func(b *testing.B, p *growthPair) func() error {
		dir, err := os.MkdirTemp(b.TempDir(), "bundle")
		if err != nil {
			b.Fatal(err)
		}
		return func() error {
			_, err := export.Write(context.Background(), p.b.Node.Org.Store, p.done, dir, export.Options{})
			return err
		}
	}},
	{"verify", func(b *testing.B, p *growthPair) func() error {
		// As `party verify` starts: no key's table built. The tables
		// are the process's, held for the first keys used often enough
		// (signature.ForgetKeyTables), so without this the pair made
		// first verified its bundle with its keys' tables and a pair made
		// later without: at 100 000, beside the pair of 10 the rounds at
		// 10 000 had used, 1.23-1.30 times the cost, where the same
		// bundle beside a new pair of 10 was 0.99-1.01.
		signature.ForgetKeyTables()
		return func() error {
			r, err := verify.VerifyDir(p.bundle, verify.Options{})
			if err == nil && len(r.Failures()) > 0 {
				err = fmt.Errorf("the bundle of %s fails", p.done)
			}
			return err
		}
	}},
	{"serve_start", func(b *testing.B, p *growthPair) func() error {
		// What `party serve` does with its record before it listens: open
		// the organisation, start the engine, resume every transaction
		// that waits on it (the resume pass).
		return func() error {
			o, err := org.Open(p.b.Node.Dir, org.Options{Clock: p.c.Now})
			if err != nil {
				return err
			}
			defer o.Close()
			e := record.New(record.Of(o), record.Options{Transport: p.b.Out})
			if err := e.Start(context.Background()); err != nil {
				return err
			}
			e.Resume(context.Background())
			return nil
		}
	}},
}

// acceptanceAct is the act document of accepting a new offer of the
// supplier's, made untimed: what the buyer's agent asks approval for.
func acceptanceAct(b *testing.B, p *growthPair) map[string]any {
	o := recordtest.Offer(b, p.s, "3200.00")
	act, err := p.b.Engine.AcceptanceAct(context.Background(), p.b.Actor(), p.b.Mandate, o.Objects["offer"])
	if err != nil {
		b.Fatal(err)
	}
	return act
}

// acceptedObligation takes a new transaction to an obligation whose
// performance the buyer accepted, untimed: what instruct_settlement pays.
func acceptedObligation(b *testing.B, p *growthPair) string {
	ctx := context.Background()
	txn := recordtest.Form(b, p.b, p.s, "3200.00")
	out, err := p.b.Engine.IssueObligation(ctx, p.b.Actor(), record.ObligationInput{MandateID: p.b.Mandate, TransactionID: txn})
	if err != nil {
		b.Fatal(err)
	}
	obl := out.Objects["obligation"]
	claim := "calibration certificates, 20 transmitters"
	if _, err := p.s.Engine.AssertPerformance(ctx, p.s.Actor(), record.AssertInput{MandateID: p.s.Mandate, ObligationID: obl, AssertedQuantity: "20",
		Evidence: []record.EvidenceInput{{EvidenceType: "third_party_certificate", Claim: claim, ArtifactHash: canonical.SHA256Hex([]byte(claim))}}}); err != nil {
		b.Fatal(err)
	}
	if _, err := p.b.Engine.Respond(ctx, p.b.Actor(), record.RespondInput{MandateID: p.b.Mandate, ObligationID: obl, ResponseType: "accept"}); err != nil {
		b.Fatal(err)
	}
	return obl
}

// get asks the buyer's principal surface for a page, as a script would.
func (p *growthPair) get(path string) error {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer bench-admin-token")
	w := httptest.NewRecorder()
	p.admin.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, w.Code, w.Body.String())
	}
	return nil
}
