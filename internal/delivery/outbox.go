package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/partyd/party/internal/reason"
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
	// AttemptTimeout bounds one attempt (30s). It is also the lease an
	// attempt holds on its message, so no other worker starts the same
	// message while it runs.
	AttemptTimeout time.Duration
	// PollInterval is the longest the worker sleeps without looking at
	// the table (30s).
	PollInterval time.Duration
	// HeldPoll is the longest a message waits before it is asked again
	// when the receiver holds it for its principal's approval (5s): a
	// person's decision, not an outage, is what it waits for, so it is
	// asked again promptly however long the person takes, not after a
	// back-off grown to minutes.
	HeldPoll time.Duration
	// Keys, if set, fetches the receiver's key records before a message
	// to it is attempted (first contact), so its replies can be verified.
	Keys KeyExchanger
	// Clock is the time leases and retries are reckoned in (time.Now).
	Clock func() time.Time
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
		o.AttemptTimeout = 30 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 30 * time.Second
	}
	if o.HeldPoll <= 0 {
		o.HeldPoll = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Handler is the application behind an outbox: the record engine. The
// worker hands it each due message it leased; the handler takes whatever
// locks the message's transaction needs and calls Outbox.Send, then
// stores what the reply moves and deletes the message (store.Txn
// .Delivered) in one database transaction, or removes the act a refusal
// ended (store.Txn.Failed), or leaves the message pending for the next
// attempt. It is the one way replies reach the application, whether the
// first attempt was made by the act itself or by the worker.
type Handler interface {
	Attempt(ctx context.Context, m store.OutboxMessage)
}

// Outbox is the durable sending side. Messages are enqueued by the
// application inside the database transactions of the acts they carry
// (store.Txn.Enqueue, with Lease when the act attempts at once); the
// Outbox delivers them, in order per transaction and peer, with retries
// and back-off, and hands every due message to the Handler.
type Outbox struct {
	store     *store.Store
	transport Transport
	handler   Handler
	opt       OutboxOptions
	owner     string
	wake      chan struct{}

	mu     sync.Mutex
	handed []store.OutboxMessage // Hand
}

// NewOutbox returns an Outbox over st that delivers through t and reports
// to h. Its owner token is fresh for this process, so leases left by an
// earlier process on the same database are recognised as dead (Start).
func NewOutbox(st *store.Store, t Transport, h Handler, opt OutboxOptions) *Outbox {
	opt.defaults()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Outbox{store: st, transport: t, handler: h, opt: opt, owner: hex.EncodeToString(b[:]), wake: make(chan struct{}, 1)}
}

// Start voids every lease an earlier process left behind, so that what it
// was delivering when it died is due at once rather than when its lease
// would have run out.
func (o *Outbox) Start(ctx context.Context) error {
	n, err := o.store.VoidLeases(ctx, o.owner, o.opt.Clock())
	if err != nil {
		return err
	}
	if n > 0 {
		o.opt.Logger.Info("voided the leases of a previous process; their messages are due now", "messages", n)
	}
	return nil
}

// Lease returns the lease an act takes on the message it enqueues and
// attempts at once.
func (o *Outbox) Lease() store.Lease {
	return store.Lease{Owner: o.owner, Until: o.opt.Clock().Add(o.opt.AttemptTimeout)}
}

// Now is the outbox's clock.
func (o *Outbox) Now() time.Time { return o.opt.Clock() }

// Hand gives the worker a message the application enqueued leased to
// this outbox (Lease) and does not attempt itself: the worker attempts it
// next, without a lease of its own to write (RunDue). Should this process
// die first, the lease dies with it and the message is due at the next
// start.
func (o *Outbox) Hand(m store.OutboxMessage) {
	o.mu.Lock()
	o.handed = append(o.handed, m)
	o.mu.Unlock()
	o.Poke()
}

// Poke wakes the worker: a message became due.
func (o *Outbox) Poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Send makes one attempt at message m, which the caller has leased (or
// enqueued leased), and returns the reply. A failure worth retrying is
// recorded (next attempt after back-off, lease released) and returned
// wrapping ErrQueued; a refusal is returned as it came, for the handler
// to settle. An older pending message of the same transaction goes first:
// then nothing is sent and the error wraps ErrQueued.
func (o *Outbox) Send(ctx context.Context, m store.OutboxMessage) (Message, error) {
	rctx := context.WithoutCancel(ctx)
	head, err := o.store.OutboxHead(ctx, m.ID)
	if err == nil && !head {
		err = fmt.Errorf("an earlier message of transaction %s to %s is still pending", m.TransactionID, m.Peer)
		if rerr := o.store.ReleaseOutbox(rctx, m.ID, o.opt.Clock()); rerr != nil {
			o.opt.Logger.Error("releasing an outbox message failed", "id", m.ID, "error", rerr)
		}
		return Message{}, fmt.Errorf("%w (message %d): %w", ErrQueued, m.ID, err)
	}
	if err != nil {
		return Message{}, fmt.Errorf("%w (message %d): %w", ErrQueued, m.ID, err)
	}
	actx, cancel := context.WithTimeout(ctx, o.opt.AttemptTimeout)
	reply, err := o.deliver(actx, m)
	cancel()
	if err == nil || Permanent(err) {
		return reply, err
	}
	o.Retry(rctx, m, err)
	return Message{}, fmt.Errorf("%w (message %d): %w", ErrQueued, m.ID, err)
}

// Retry records a failed attempt at m and schedules the next one after the
// back-off its attempts have earned, or, when the receiver holds it for its
// principal's approval, within HeldPoll.
func (o *Outbox) Retry(ctx context.Context, m store.OutboxMessage, cause error) {
	wait := o.Backoff(m.Attempts + 1)
	if errors.Is(cause, ErrUnavailable) && slices.Contains(reason.CodesOf(cause), reason.ApprovalRequired) {
		wait = min(wait, o.opt.HeldPoll) // held for a person, not away
	}
	next := o.opt.Clock().Add(wait)
	o.opt.Logger.Info("outbox attempt failed; will retry", "id", m.ID, "peer", m.Peer, "transaction_id", m.TransactionID,
		"attempts", m.Attempts+1, "next_attempt", next, "error", cause)
	if err := o.store.RetryOutbox(ctx, m.ID, next, cause.Error()); err != nil {
		o.opt.Logger.Error("recording a retry failed; the message becomes due when its lease ends", "id", m.ID, "error", err)
	}
	o.Poke()
}

func (o *Outbox) deliver(ctx context.Context, m store.OutboxMessage) (Message, error) {
	if o.opt.Keys != nil {
		if err := o.opt.Keys.EnsureKeys(ctx, m.Peer); err != nil {
			return Message{}, fmt.Errorf("%w: key records of %s: %w", ErrUnavailable, m.Peer, err)
		}
	}
	return o.transport.Deliver(ctx, m.Peer, m.TransactionID, m.Objects)
}

// Pending returns the messages not yet delivered or failed, oldest first.
func (o *Outbox) Pending(ctx context.Context) ([]store.OutboxMessage, error) {
	return o.store.PendingOutbox(ctx)
}

// RunDue hands the handler every message handed to the worker (Hand),
// then leases every message due now and hands each to the handler, and
// returns how many it handed over. Run calls it in a loop; a test with a
// simulated clock calls it directly.
func (o *Outbox) RunDue(ctx context.Context) int {
	n := 0
	for ctx.Err() == nil {
		o.mu.Lock()
		handed := o.handed
		o.handed = nil
		o.mu.Unlock()
		if len(handed) == 0 {
			break
		}
		for _, m := range handed {
			o.handler.Attempt(ctx, m)
		}
		n += len(handed)
	}
	for ctx.Err() == nil {
		now := o.opt.Clock()
		due, err := o.store.DueOutbox(ctx, now, 16)
		if err != nil {
			if ctx.Err() == nil {
				o.opt.Logger.Error("reading the outbox failed", "error", err)
			}
			return n
		}
		handed := 0
		for _, m := range due {
			lease := store.Lease{Owner: o.owner, Until: now.Add(o.opt.AttemptTimeout)}
			if ok, err := o.store.LeaseOutbox(ctx, m.ID, now, lease); err != nil || !ok {
				continue // another worker has it
			}
			o.handler.Attempt(ctx, m)
			handed++
		}
		n += handed
		if handed == 0 {
			return n
		}
	}
	return n
}

// Run is the retry worker: it attempts every due message, then sleeps
// until the next one is due, a message is poked, or PollInterval passes.
// It returns when ctx ends.
func (o *Outbox) Run(ctx context.Context) error {
	for {
		o.RunDue(ctx)
		wait := o.opt.PollInterval
		if next, ok, err := o.store.NextOutboxAttempt(ctx); err == nil && ok {
			if d := next.Sub(o.opt.Clock()); d < wait {
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

// Backoff is the wait after the given number of failed attempts:
// InitialBackoff doubled per attempt, capped at MaxBackoff, with the
// actual wait drawn from [d/2, d].
func (o *Outbox) Backoff(attempts int) time.Duration {
	d := o.opt.InitialBackoff
	for i := 1; i < attempts && d < o.opt.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, o.opt.MaxBackoff)
	half := d / 2
	return half + mrand.N(d-half+1)
}
