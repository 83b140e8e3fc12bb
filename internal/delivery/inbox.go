package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/partyd/party/internal/store"
)

// InboxReceiver is what a binding's server needs of the receiving side: a
// Receiver that also answers a sender asking for the reply to a message it
// sent (the plain HTTPS binding fetches replies separately). Whatever
// Receive answers without error, Reply answers for the same sender and
// MessageKey from then on. The record engine is one; Inbox wraps any
// other Receiver into one.
type InboxReceiver interface {
	Receiver
	Reply(ctx context.Context, from, key string) ([][]byte, error)
}

// Inbox is the receiving side's Receiver: it checks a message, answers a
// redelivery from the inbox table, and otherwise calls the application
// once and records its reply. A binding's server calls it. It is safe for
// concurrent use; two copies of one message arriving at once are
// serialised, so the application sees it once.
//
// The reply is recorded after the application returns. If the process
// dies in between, the redelivery reaches the application again; the
// application's own record (store.PutObject of identical bytes is a
// no-op) makes that harmless.
type Inbox struct {
	store  *store.Store
	app    Receiver
	keys   KeyExchanger
	logger *slog.Logger

	mu     sync.Mutex
	active map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// InboxOptions configure an Inbox.
type InboxOptions struct {
	// Keys, if set, fetches the sender's key records before the first
	// message from it reaches the application (first contact).
	Keys KeyExchanger
	// Logger receives one line per duplicate and per failure.
	Logger *slog.Logger
}

// NewInbox returns an Inbox recording replies in st and handing new
// messages to app.
func NewInbox(st *store.Store, app Receiver, opt InboxOptions) *Inbox {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Inbox{store: st, app: app, keys: opt.Keys, logger: opt.Logger, active: map[string]*keyLock{}}
}

func (in *Inbox) lock(key string) func() {
	in.mu.Lock()
	l, ok := in.active[key]
	if !ok {
		l = &keyLock{}
		in.active[key] = l
	}
	l.refs++
	in.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		in.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(in.active, key)
		}
		in.mu.Unlock()
	}
}

// Receive implements Receiver.
func (in *Inbox) Receive(ctx context.Context, from, transactionID string, msg Message) ([][]byte, error) {
	objects := msg.Objects
	if !msg.Checked() {
		if err := CheckMessage(transactionID, objects); err != nil {
			return nil, err
		}
	}
	key := MessageKey(transactionID, objects)
	unlock := in.lock(from + "\x00" + key)
	defer unlock()

	reply, err := in.store.InboxReply(ctx, from, key)
	if err == nil {
		in.logger.Info("answered a redelivered message with its first reply", "from", from, "transaction_id", transactionID, "message_key", key)
		return reply, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: inbox: %w", ErrUnavailable, err)
	}
	if in.keys != nil {
		if err := in.keys.EnsureKeys(ctx, from); err != nil {
			in.logger.Warn("could not fetch the sender's key records; the sender will retry", "from", from, "error", err)
			return nil, fmt.Errorf("%w: key records of %s: %w", ErrUnavailable, from, err)
		}
	}
	reply, err = in.app.Receive(ctx, from, transactionID, msg)
	if err != nil {
		return nil, err
	}
	stored, err := in.store.PutInboxBytes(context.WithoutCancel(ctx), from, key, transactionID, reply)
	if err != nil {
		// The application has the message; the sender will retry and
		// reach it again, which its record absorbs.
		return nil, fmt.Errorf("%w: inbox: %w", ErrUnavailable, err)
	}
	return stored, nil
}

// Reply returns the reply recorded for message key from org, or an error
// wrapping store.ErrNotFound. The plain HTTPS binding serves it to the
// sender after its 202.
func (in *Inbox) Reply(ctx context.Context, from, key string) ([][]byte, error) {
	return in.store.InboxReply(ctx, from, key)
}
