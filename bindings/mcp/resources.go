package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
)

// The record as MCP resources. Each transaction this instance holds is a
// resource, its content the same JSON get_transaction_record returns; the
// offers waiting for the agent (list_inbox without a mandate) and the list
// of transactions are resources too. A client that subscribes to one is
// sent notifications/resources/updated whenever a commit may have changed
// it: the counterparty appended an event and this instance countersigned
// it, the counterparty's countersignature of this agent's event arrived, an
// offer arrived, an act was refused and removed (record.Engine.Subscribe).
// A notification carries no content: read the resource again.
const (
	// TransactionURIPrefix + a transaction id is that transaction's URI.
	TransactionURIPrefix = "party://transactions/"
	// TransactionURITemplate is the RFC 6570 template of transaction URIs.
	TransactionURITemplate = TransactionURIPrefix + "{transaction_id}"
	// TransactionsURI is the list of transactions (list_transactions' first
	// page, most recently updated first).
	TransactionsURI = "party://transactions"
	// InboxURI is the offers waiting for this agent's answer.
	InboxURI = "party://inbox"
)

// ResourceInstructions is appended to the server instructions when the
// record's resources are served.
const ResourceInstructions = `

Resources and notifications: every transaction is the resource party://transactions/{transaction_id} (the JSON get_transaction_record returns), the offers waiting for you are party://inbox (list_inbox), and party://transactions lists the transactions. Subscribe (resources/subscribe) to a transaction or to the inbox and you are sent notifications/resources/updated when the counterparty acts or the state changes; then read the resource again instead of polling.`

// Option adjusts NewServer.
type Option func(*serverSetup)

type serverSetup struct {
	opts  *sdk.ServerOptions
	after []func(*sdk.Server)
}

// RecordSource is what the resources read and listen to: the record
// engine.
type RecordSource interface {
	Transaction(ctx context.Context, id string) (record.TransactionView, error)
	ListTransactions(ctx context.Context, f record.ListFilter) (record.TransactionPage, error)
	Inbox(ctx context.Context, mandateID string, limit int) ([]record.InboxItem, error)
	Subscribe(fn func(record.Change)) (cancel func())
}

// WithResources serves src's transactions and inbox as resources with
// subscriptions, notifying subscribers of every change src announces until
// ctx ends.
func WithResources(ctx context.Context, src RecordSource) Option {
	return func(s *serverSetup) {
		r := &resources{src: src, log: s.opts.Logger, wake: make(chan struct{}, 1), dirty: map[string]bool{}}
		s.opts.Instructions += ResourceInstructions
		s.opts.SubscribeHandler = r.subscribe
		s.opts.UnsubscribeHandler = func(context.Context, *sdk.UnsubscribeRequest) error { return nil }
		s.after = append(s.after, func(srv *sdk.Server) {
			srv.AddResource(&sdk.Resource{URI: InboxURI, Name: "inbox", Title: "Offers waiting for you", MIMEType: "application/json",
				Description: "The counterparties' offers you can still accept, as list_inbox returns them without a mandate. Subscribe to hear when one arrives or is withdrawn."}, r.readInbox)
			srv.AddResource(&sdk.Resource{URI: TransactionsURI, Name: "transactions", Title: "Your transactions", MIMEType: "application/json",
				Description: "The most recently updated transactions, as list_transactions returns them."}, r.readList)
			srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: TransactionURITemplate, Name: "transaction", Title: "A transaction's record", MIMEType: "application/json",
				Description: "One transaction's record as this instance holds it, as get_transaction_record returns it. Subscribe to hear when the counterparty acts or the state changes."}, r.readTransaction)
			r.srv = srv
			cancel := src.Subscribe(r.heard)
			go func() {
				defer cancel()
				r.run(ctx)
			}()
		})
	}
}

// resources serves the record's resources and turns the engine's changes
// into notifications.
type resources struct {
	src  RecordSource
	srv  *sdk.Server
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex
	dirty map[string]bool // transactions changed since the last notification

	// subscribed is set by the first subscription admitted. Until then no
	// session can be subscribed to anything (the SDK records a
	// subscription only after subscribe admits it), so a change is not
	// queued: every act of an instance whose agents do not subscribe
	// otherwise cost three notifications to nobody, each logged.
	subscribed atomic.Bool
}

// heard queues a change and returns at once: the engine's commit is never
// held up by a slow or absent client. Changes to one transaction that
// arrive before the notifier runs are sent as one notification.
func (r *resources) heard(c record.Change) {
	if !r.subscribed.Load() {
		return
	}
	r.mu.Lock()
	r.dirty[c.TransactionID] = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *resources) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		ids := make([]string, 0, len(r.dirty))
		for id := range r.dirty {
			ids = append(ids, id)
		}
		clear(r.dirty)
		r.mu.Unlock()
		for _, id := range ids {
			r.notify(ctx, TransactionURIPrefix+id)
		}
		r.notify(ctx, TransactionsURI)
		r.notify(ctx, InboxURI)
	}
}

func (r *resources) notify(ctx context.Context, uri string) {
	if err := r.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		r.log.Warn("mcp: resource update notification failed", "uri", uri, "error", err)
	}
}

// subscribe admits a subscription to a resource that exists.
func (r *resources) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	switch {
	case uri == InboxURI, uri == TransactionsURI:
		r.subscribed.Store(true)
		return nil
	case strings.HasPrefix(uri, TransactionURIPrefix):
		if _, err := r.src.Transaction(ctx, strings.TrimPrefix(uri, TransactionURIPrefix)); err != nil {
			return sdk.ResourceNotFoundError(uri)
		}
		r.subscribed.Store(true)
		return nil
	}
	return sdk.ResourceNotFoundError(uri)
}

func (r *resources) readTransaction(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id := strings.TrimPrefix(uri, TransactionURIPrefix)
	v, err := r.src.Transaction(ctx, id)
	var refused *reason.Refusal
	if errors.As(err, &refused) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	return jsonResource(uri, v, err)
}

func (r *resources) readList(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	p, err := r.src.ListTransactions(ctx, record.ListFilter{})
	return jsonResource(req.Params.URI, p, err)
}

func (r *resources) readInbox(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	items, err := r.src.Inbox(ctx, "", 0)
	return jsonResource(req.Params.URI, InboxResult{Offers: items}, err)
}

func jsonResource(uri string, v any, err error) (*sdk.ReadResourceResult, error) {
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
