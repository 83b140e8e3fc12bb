package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/partyd/party/internal/store"
)

// OutboxOptions configure an Outbox. Zero values take the defaults shown.
type OutboxOptions struct {
	// InitialBackoff is the wait after the first failed attempt (1s);
	// each further failure doubles it, up to MaxBackoff (5m). The wait
	// actually used is drawn uniformly from its upper half (jitter), so
	// two instances that failed together do not retry together.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxAttempts, if positive, marks a message failed after that many
	// attempts. Zero retries for as long as it takes: a message is never
	// given up on silently.
	MaxAttempts int
	// AttemptTimeout bounds one attempt (2m). It is also the lease an
	// attempt holds on its message, so no other worker starts the same
	// message while it runs.
	AttemptTimeout time.Duration
	// PollInterval is the longest the worker sleeps without looking at
	// the table (30s), so messages another process enqueued are seen.
	PollInterval time.Duration
	// Keys, if set, fetches the receiver's key records before the first
	// message to it (first contact), so its replies can be verified.
	Keys KeyExchanger
	// OnDelivered is called after a message is delivered by the worker or
	// by Send, with the reply objects.
	OnDelivered func(ctx context.Context, m store.OutboxMessage, reply [][]byte)
	// OnFailed is called when a message is marked failed.
	OnFailed func(ctx context.Context, m store.OutboxMessage, err error)
	// Logger receives a line per failed attempt. Error text is logged
	// locally only.
	Logger *slog.Logger
}

func (o *OutboxOptions) defaults() {
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.MaxBackoff < o.InitialBackoff {
		o.MaxBackoff = o.InitialBackoff
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 2 * time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Outbox is the durable sending side. It is safe for concurrent use, and
// several Outboxes (in several processes) may share one database: leases
// in the table keep them from attempting one message at once.
type Outbox struct {
	store     *store.Store
	transport Transport
	opt       OutboxOptions
	wake      chan struct{}
}

// NewOutbox returns an Outbox over st that delivers through t.
func NewOutbox(st *store.Store, t Transport, opt OutboxOptions) *Outbox {
	opt.defaults()
	return &Outbox{store: st, transport: t, opt: opt, wake: make(chan struct{}, 1)}
}

// Enqueue stores a message for the worker (Run) and returns its id. The
// objects are checked first (CheckMessage), so a message the peer would
// refuse for its framing is never queued.
func (o *Outbox) Enqueue(ctx context.Context, peer, transactionID string, objects [][]byte) (int64, error) {
	if err := CheckMessage(transactionID, objects); err != nil {
		return 0, err
	}
	id, err := o.store.EnqueueOutbox(ctx, peer, transactionID, MessageKey(transactionID, objects), objects, time.Time{})
	if err != nil {
		return 0, err
	}
	o.poke()
	return id, nil
}

// Send stores the message durably and then attempts it once at once. On
// delivery it returns the peer's reply objects. If the attempt fails in a
// way worth retrying, or an older message of the same transaction to the
// same peer is still pending (order is kept), the message stays in the
// outbox for Run and the error wraps ErrQueued (and the cause); the reply
// will reach OnDelivered. A refusal is returned as is (and the message is
// marked failed).
func (o *Outbox) Send(ctx context.Context, peer, transactionID string, objects [][]byte) ([][]byte, error) {
	if err := CheckMessage(transactionID, objects); err != nil {
		return nil, err
	}
	// Enqueued already leased: the worker cannot pick it up between the
	// insert and this attempt.
	id, err := o.store.EnqueueOutbox(ctx, peer, transactionID, MessageKey(transactionID, objects), objects, time.Now().Add(o.opt.AttemptTimeout))
	if err != nil {
		return nil, err
	}
	head, err := o.store.OutboxHead(ctx, id)
	if err == nil && !head {
		err = errors.New("an earlier message of this transaction to this peer is still pending")
	}
	if err != nil {
		if rerr := o.store.ReleaseOutbox(context.WithoutCancel(ctx), id); rerr != nil {
			o.opt.Logger.Error("releasing an outbox message failed; it becomes due when its lease ends", "id", id, "error", rerr)
		}
		o.poke()
		return nil, fmt.Errorf("%w (message %d): %w", ErrQueued, id, err)
	}
	m, err := o.store.GetOutbox(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w (message %d): %w", ErrQueued, id, err)
	}
	return o.attempt(ctx, m)
}

// Pending returns the messages not yet delivered or failed, oldest first.
func (o *Outbox) Pending(ctx context.Context) ([]store.OutboxMessage, error) {
	return o.store.PendingOutbox(ctx)
}

// Message returns one outbox message by id.
func (o *Outbox) Message(ctx context.Context, id int64) (store.OutboxMessage, error) {
	return o.store.GetOutbox(ctx, id)
}

func (o *Outbox) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Run is the retry worker: it attempts every due message, then sleeps
// until the next one is due, a message is enqueued here, or PollInterval
// passes. It returns when ctx ends.
func (o *Outbox) Run(ctx context.Context) error {
	for {
		for {
			due, err := o.store.DueOutbox(ctx, time.Now(), 16)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				o.opt.Logger.Error("reading the outbox failed", "error", err)
				break
			}
			for _, m := range due {
				if ok, err := o.store.LeaseOutbox(ctx, m.ID, time.Now(), time.Now().Add(o.opt.AttemptTimeout)); err != nil || !ok {
					continue // another worker has it
				}
				o.attempt(ctx, m)
			}
			if len(due) == 0 || ctx.Err() != nil {
				break
			}
		}
		wait := o.opt.PollInterval
		if next, ok, err := o.store.NextOutboxAttempt(ctx); err == nil && ok {
			if d := time.Until(next); d < wait {
				wait = max(d, 0)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-o.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// attempt delivers m, which the caller has leased, and records the
// outcome.
func (o *Outbox) attempt(ctx context.Context, m store.OutboxMessage) ([][]byte, error) {
	actx, cancel := context.WithTimeout(ctx, o.opt.AttemptTimeout)
	reply, err := o.deliver(actx, m)
	cancel()
	// The outcome is recorded even if ctx ended meanwhile: the attempt
	// happened, and its record must say so.
	rctx := context.WithoutCancel(ctx)
	if err == nil {
		if merr := o.store.MarkOutboxDelivered(rctx, m.ID, reply); merr != nil {
			o.opt.Logger.Error("recording a delivery failed; the message will be sent again and the receiver will answer it from its inbox", "id", m.ID, "error", merr)
		}
		if o.opt.OnDelivered != nil {
			o.opt.OnDelivered(rctx, m, reply)
		}
		return reply, nil
	}
	attempts := m.Attempts + 1
	if Permanent(err) || (o.opt.MaxAttempts > 0 && attempts >= o.opt.MaxAttempts) {
		o.opt.Logger.Warn("outbox message failed for good", "id", m.ID, "peer", m.Peer, "transaction_id", m.TransactionID, "attempts", attempts, "error", err)
		if merr := o.store.MarkOutboxFailed(rctx, m.ID, err.Error()); merr != nil {
			o.opt.Logger.Error("recording a failed message failed", "id", m.ID, "error", merr)
		}
		if o.opt.OnFailed != nil {
			o.opt.OnFailed(rctx, m, err)
		}
		return nil, err
	}
	next := time.Now().Add(o.backoff(attempts))
	o.opt.Logger.Info("outbox attempt failed; will retry", "id", m.ID, "peer", m.Peer, "attempts", attempts, "next_attempt", next, "error", err)
	if merr := o.store.RetryOutbox(rctx, m.ID, next, err.Error()); merr != nil {
		o.opt.Logger.Error("recording a retry failed; the message becomes due when its lease ends", "id", m.ID, "error", merr)
	}
	return nil, fmt.Errorf("%w (message %d): %w", ErrQueued, m.ID, err)
}

func (o *Outbox) deliver(ctx context.Context, m store.OutboxMessage) ([][]byte, error) {
	if o.opt.Keys != nil {
		if err := o.opt.Keys.EnsureKeys(ctx, m.Peer); err != nil {
			return nil, fmt.Errorf("%w: key records of %s: %w", ErrUnavailable, m.Peer, err)
		}
	}
	return o.transport.Deliver(ctx, m.Peer, m.TransactionID, m.Objects)
}

// backoff is the wait after the given number of failed attempts:
// InitialBackoff doubled per attempt, capped at MaxBackoff, with the
// actual wait drawn from [d/2, d].
func (o *Outbox) backoff(attempts int) time.Duration {
	d := o.opt.InitialBackoff
	for i := 1; i < attempts && d < o.opt.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, o.opt.MaxBackoff)
	half := d / 2
	return half + rand.N(d-half+1)
}
