package agent_test

import (
	"context"
	"sync"
	"testing"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/store"
)

// TestOneRequestForOneActFiledAtOnce: agents (or an agent and the
// instance holding an act it answers) asking at the same moment for the
// principal's approval of one act get one pending request between them,
// not one each: the principal is asked once, and the approval of it
// releases every one of them.
func TestOneRequestForOneActFiledAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, _, a, _, id := walkthroughAgent(t, nil)
	const filers = 8
	ids := make([]string, filers)
	errs := make([]error, filers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range filers {
		wg.Go(func() {
			<-start
			r, err := a.RequestApproval(ctx, agent.VerifyInput{MandateID: id, ProposedAction: act("3200.00")})
			ids[i], errs[i] = r.ApprovalRequestID, err
		})
	}
	close(start)
	wg.Wait()
	for i := range filers {
		if errs[i] != nil {
			t.Fatalf("filer %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("filer %d was given request %s, filer 0 %s", i, ids[i], ids[0])
		}
	}
	pending, err := n.Org.Store.ApprovalRequestsShown(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, r := range pending {
		if r.Status == store.ApprovalPending {
			held = append(held, r.ID)
		}
	}
	if len(held) != 1 {
		t.Fatalf("%d filings of one act left %d pending requests %v, want one", filers, len(held), held)
	}
}
