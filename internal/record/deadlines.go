package record

// Deadlines (pilot state machine §5 row deadline.elapsed; D16, the
// authoritative clock and the deadline's source, decided here:
// docs/record-protocol.md, "Nothing waits forever (issue 39)").
//
// A draft transaction whose latest offer can no longer be accepted ends
// expired. Its deadline is the offer's valid_until, or, when its offeror
// withdrew it first, the time of the decision that withdrew it. Once
// this instance's clock is past the deadline by ExpiryGrace (twice the
// clock skew the parties allow each other), either party's instance
// appends deadline.elapsed (draft → expired) by itself: the act
// transaction.expire, whose document carries the lapsed offer's terms (as
// transaction.cancel's does), under a mandate of this organisation's
// agents that lists it; data {offer_id, deadline}, and the withdrawal's
// decision id when a withdrawal set it. An organisation none of whose
// mandates lists transaction.expire expires nothing itself; its
// counterparty may.
//
// The countersigner checks the deadline by its own record and clock: the
// offer is its latest, the deadline the one its copy computes, and its
// own clock past it (a clock up to ExpiryGrace behind the appender's is
// still past it). An acceptance made before the deadline and still in
// flight wins over the expiry, whoever's organisation sorts first: the
// offeree refuses a deadline.elapsed while its own agreement.direct waits
// for the offeror, and the offeror's own pending deadline.elapsed gives way
// to that acceptance (position). The verifier's guard reads the same from
// a bundle (verify, expiredGuard).
//
// Package deadlines calls WorkDeadlines (and WorkTiming) every
// DeadlineEvery, in party serve.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/object"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ExpiryGrace is how long past an offer's deadline an instance waits
// before it expires the transaction: twice the clock skew allowed between
// the parties, so that the counterparty's clock, up to that much behind,
// is past the deadline too when the event reaches it.
const ExpiryGrace = 2 * authority.ClockSkew

// DeadlineEvery is how often the deadline loop (package deadlines) calls
// WorkDeadlines and WorkTiming; probeAway paces its probes on it.
const DeadlineEvery = 2 * time.Second

// offerDeadline returns when an offer stops being acceptable: its
// valid_until, or the time of the decision that withdrew it, if earlier.
func (e *Engine) offerDeadline(ctx context.Context, offer *object.Offer) (time.Time, error) {
	deadline, ok := offer.ValidUntil()
	if !ok {
		return time.Time{}, refusef(reason.StateTransitionDenied, "offer %s states no valid_until", offer.ID())
	}
	id, err := e.db.WithdrawalOf(ctx, offer.ID())
	if err != nil || id == "" {
		return deadline, err
	}
	pol, ok := e.getTyped(ctx, offer.Txn(), id, protocol.PolicyDecision)
	if !ok {
		return deadline, nil
	}
	if at, err := envelope.ParseTimestamp(pol.P("evaluated_at")); err == nil && at.Before(deadline) {
		return at, nil
	}
	return deadline, nil
}

// ExpireInput names a draft transaction to expire, and the mandate of
// this organisation's agents it is expired under.
type ExpireInput struct {
	MandateID     string
	TransactionID string
}

// Expire appends deadline.elapsed (draft → expired) once the latest
// offer's deadline is ExpiryGrace past (see the top of this file).
func (e *Engine) Expire(ctx context.Context, a Actor, in ExpireInput) (Outcome, error) {
	return transactionExpire.perform(ctx, e, a, in)
}

// transactionExpire is transaction.expire: deadline.elapsed, appended by
// the deadline loop.
var transactionExpire = &act[ExpireInput]{
	name: protocol.ActTransactionExpire,
	lines: []actLine{
		{event: protocol.EvDeadlineElapsed, offers: true, check: checkExpired},
	},
	spec: expireSpec,
}

func expireSpec(ctx context.Context, e *Engine, a Actor, in ExpireInput) (actSpec, error) {
	var offer *object.Offer
	var deadline time.Time
	return actSpec{
		txn: in.TransactionID, mandateID: in.MandateID, event: protocol.EvDeadlineElapsed,
		check: func(ctx context.Context, st *state) error {
			if st.State() != protocol.Draft {
				return refusef(reason.StateTransitionDenied, "transaction %s is %s: only a draft transaction expires by its offer's deadline", in.TransactionID, st.t.State)
			}
			var err error
			if offer, err = e.endingOffer(ctx, in.TransactionID); err != nil {
				return err
			}
			if deadline, err = e.offerDeadline(ctx, offer); err != nil {
				return err
			}
			if st.now.Before(deadline.Add(ExpiryGrace)) {
				return refusef(reason.StateTransitionDenied, "offer %s can be accepted until %s (and a counterparty's clock may be behind): the transaction expires after %s",
					offer.ID(), envelope.Timestamp(deadline), envelope.Timestamp(deadline.Add(ExpiryGrace)))
			}
			return nil
		},
		act: func(context.Context, *state) (map[string]any, map[string]any, error) { return offer.Terms(), nil, nil },
		// References only (gate): every party derives the deadline from
		// the offer and any withdrawal of it it holds.
		build: func(_ context.Context, _ *state, b *builder) error { return namesOffer(b, offer) },
	}, nil
}

// checkExpired is the countersigner's live guard of deadline.elapsed: the
// offer named is this copy's latest, the deadline the one this copy
// computes for it, and this instance's own clock past it. (An acceptance
// of this instance's in flight is met by position, which refuses the
// expiry first.)
func checkExpired(ctx context.Context, e *Engine, r *receipt, ev *Event) error {
	last, err := e.namedLatestOffer(ctx, r, ev)
	if err != nil {
		return err
	}
	deadline, err := e.offerDeadline(ctx, last)
	if err != nil {
		return err
	}
	if e.clock().Before(deadline) {
		return refusef(reason.StateTransitionDenied, "offer %s can still be accepted until %s by this instance's clock: the deadline has not elapsed", last.ID(), envelope.Timestamp(deadline))
	}
	return nil
}

// WorkDeadlines expires every draft transaction whose latest offer's
// deadline is ExpiryGrace past, under a mandate of this organisation that
// allows transaction.expire; it returns how many it expired. A refusal is
// logged and tried again a minute later (a counterparty that was away, a
// mandate that holds the act for approval). A transaction is read again
// only once its deadline (with the grace) comes or its record changed
// (Engine.looked). The deadline loop (package deadlines) calls it every
// DeadlineEvery; tests with a simulated clock call it directly.
func (e *Engine) WorkDeadlines(ctx context.Context) int {
	ts, err := e.db.TransactionsInState(ctx, string(protocol.Draft))
	if err != nil {
		e.log.Warn("reading the deadlines failed", "error", err)
		return 0
	}
	now := e.clock()
	n := 0
	for _, t := range ts {
		if ctx.Err() != nil {
			return n
		}
		if next, ok := e.looked.Load(t.ID); ok && now.Before(next.(time.Time)) {
			continue // nothing changes before then unless its record does
		}
		offer, err := e.latestOffer(ctx, t.ID)
		if err != nil || offer == nil {
			continue
		}
		deadline, err := e.offerDeadline(ctx, offer)
		if err != nil {
			continue
		}
		if due := deadline.Add(ExpiryGrace); now.Before(due) {
			e.looked.Store(t.ID, due)
			continue
		}
		if msgs, err := e.db.TransactionOutbox(ctx, t.ID); err == nil && len(msgs) > 0 {
			continue // an act of this instance's is on its way; its answer comes first
		}
		if e.expire(ctx, t.ID, offer) {
			n++
			continue
		}
		e.looked.Store(t.ID, now.Add(time.Minute))
	}
	return n
}

// expire expires txn under the first mandate of this organisation that
// allows it: the one its latest offer was made under, when it is this
// organisation's, then every active one listing transaction.expire.
func (e *Engine) expire(ctx context.Context, txn string, offer *object.Offer) bool {
	var candidates []string
	if offer.Org() == e.org.Config().OrganizationID {
		candidates = append(candidates, offer.Mandate())
	}
	ms, err := e.db.Mandates(ctx, "local")
	if err != nil {
		e.log.Warn("listing this organisation's mandates failed", "error", err)
		return false
	}
	for _, m := range ms {
		if m.Status != store.StatusActive || m.ID == offer.Mandate() {
			continue
		}
		var doc struct {
			Actions []string `json:"actions"`
		}
		if json.Unmarshal(m.Body, &doc) == nil && contains(doc.Actions, string(protocol.ActTransactionExpire)) {
			candidates = append(candidates, m.ID)
		}
	}
	var last error
	for _, id := range candidates {
		out, err := e.Expire(ctx, instanceActor, ExpireInput{MandateID: id, TransactionID: txn})
		if err == nil {
			e.log.Info("a transaction expired: its offer's deadline passed", "transaction_id", txn, "offer_id", offer.ID(), "status", out.Status)
			return true
		}
		last = err
	}
	if last != nil {
		e.log.Info("a transaction's offer lapsed, and this instance did not expire it", "transaction_id", txn, "codes", reason.CodesOf(last), "error", last)
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
