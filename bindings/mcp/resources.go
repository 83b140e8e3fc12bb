package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/store"
)

// The record and the agent's approval requests as MCP resources. Each
// transaction this instance holds is a resource, its content the same JSON
// get_transaction_record returns; the offers waiting for the agent
// (list_inbox without a mandate) and the list of transactions are
// resources too (WithResources). Each of the agent's approval requests is
// a resource, its content the JSON approval_status returns, and so is the
// list of them (WithApprovals).
//
// A client that subscribes to one is sent notifications/resources/updated
// once for each change of its content, never for a commit that left it as
// it was: the notifier reads a subscribed resource the way a client read
// does and announces it only when the bytes differ from those it last
// announced (or read when the subscription began). What wakes it:
//
//   - for the record, the engine's change hook (record.Engine.Subscribe):
//     the counterparty appended an event and this instance countersigned
//     it, the counterparty's countersignature of this agent's event
//     arrived, an offer arrived, an act was refused and removed;
//   - for approvals, a poll of the approval requests' version number
//     (store.ApprovalRequestsVersion) every ApprovalPoll while one is
//     subscribed, since the principal decides on the admin page of this
//     process or with the CLI in another, and only the database sees both;
//     and the clock reaching a granted approval's expiry.
//
// Announcements of one resource that arrive before the notifier runs are
// read once. A notification carries no content: read the resource again.
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
	// ApprovalsURI is the agent's latest approval requests, newest first.
	ApprovalsURI = "party://approvals"
	// ApprovalURIPrefix + an approval request id is that request's URI.
	ApprovalURIPrefix = "party://approvals/"
	// ApprovalURITemplate is the RFC 6570 template of approval request URIs.
	ApprovalURITemplate = ApprovalURIPrefix + "{approval_request_id}"
)

// ApprovalPoll is how often the approval requests' version is read while
// an agent is subscribed to one of its approval resources: the latency of
// a decision's notification.
const ApprovalPoll = time.Second

// ResourceInstructions is appended to the server instructions when the
// record's resources are served.
const ResourceInstructions = `

Resources and notifications: every transaction is the resource party://transactions/{transaction_id} (the JSON get_transaction_record returns), the offers waiting for you are party://inbox (list_inbox), and party://transactions lists the transactions. Subscribe (resources/subscribe) to a transaction or to the inbox and you are sent notifications/resources/updated when the counterparty acts or the state changes; then read the resource again instead of polling.`

// ApprovalInstructions is appended to the server instructions when the
// agent's approval requests are served as resources.
const ApprovalInstructions = `

Approvals: each of your approval requests is the resource party://approvals/{approval_request_id} (the JSON approval_status returns), and party://approvals lists your latest ones. Subscribe to the request a refusal or request_approval named, instead of polling approval_status: you are sent notifications/resources/updated when your principal approves or rejects it, and when an approval expires.`

// Option adjusts NewServer.
type Option func(*serverSetup)

type serverSetup struct {
	opts  *sdk.ServerOptions
	after []func(*sdk.Server)
	// agent is the agent the server is for (NewAgentServer): the
	// resources are read as that agent's.
	agent string
	res   *resources
}

// resources returns the server's resources, set up by the first option
// that serves any.
func (s *serverSetup) resources(ctx context.Context) *resources {
	if s.res != nil {
		return s.res
	}
	r := &resources{log: s.opts.Logger, wake: make(chan struct{}, 1), dirty: map[string]bool{},
		subs: map[string]map[*sdk.ServerSession]bool{}, sent: map[string][sha256.Size]byte{}}
	s.res = r
	s.opts.SubscribeHandler = r.subscribe
	s.opts.UnsubscribeHandler = r.unsubscribe
	s.after = append(s.after, func(srv *sdk.Server) { r.serve(ctx, srv, s.agent) })
	return r
}

// forAgent names the agent the server is for.
func forAgent(agentID string) Option {
	return func(s *serverSetup) { s.agent = agentID }
}

// RecordSource is what the resources read and listen to: the record
// engine.
type RecordSource interface {
	Transaction(ctx context.Context, id string) (readmodel.TransactionView, error)
	ListTransactions(ctx context.Context, f readmodel.ListFilter) (readmodel.TransactionPage, error)
	Agent(agentID string) (record.Actor, error)
	Inbox(ctx context.Context, a record.Actor, mandateID string, limit int) ([]readmodel.InboxItem, error)
	Subscribe(fn func(record.Change)) (cancel func())
}

// ApprovalSource is what the approval resources read: one agent's surface
// (agent.Surface), which shows only that agent's requests.
type ApprovalSource interface {
	Approvals(ctx context.Context) ([]agent.ApprovalStatusResult, error)
	ApprovalStatus(ctx context.Context, requestID string) (agent.ApprovalStatusResult, error)
	ApprovalsVersion(ctx context.Context) (int64, error)
	Now() time.Time
}

// ApprovalsResult is party://approvals: the agent's latest approval
// requests, newest first.
type ApprovalsResult struct {
	ApprovalRequests []agent.ApprovalStatusResult `json:"approval_requests"`
}

// WithResources serves src's transactions and inbox as resources with
// subscriptions, notifying subscribers of every change src announces until
// ctx ends.
func WithResources(ctx context.Context, src RecordSource) Option {
	return func(s *serverSetup) {
		s.resources(ctx).src = src
		s.opts.Instructions += ResourceInstructions
	}
}

// WithApprovals serves the approval requests src shows (one agent's) as
// resources with subscriptions, notifying subscribers when one is filed,
// decided or expires, until ctx ends.
func WithApprovals(ctx context.Context, src ApprovalSource) Option {
	return func(s *serverSetup) {
		s.resources(ctx).appr = src
		s.opts.Instructions += ApprovalInstructions
	}
}

// resources serves the resources and turns changes into notifications.
type resources struct {
	src   RecordSource   // nil: no record resources
	appr  ApprovalSource // nil: no approval resources
	agent string
	srv   *sdk.Server
	log   *slog.Logger
	wake  chan struct{}

	mu    sync.Mutex
	dirty map[string]bool // resources that may have changed since the last pass
	// subs are the sessions subscribed to each resource, as far as the
	// subscribe and unsubscribe handlers saw (a closed session is dropped
	// at the next pass): only those resources are read and announced.
	subs map[string]map[*sdk.ServerSession]bool
	// sent is the hash of each subscribed resource's content as last
	// announced, or as read when its first subscription began.
	sent map[string][sha256.Size]byte
	// apprVersion is the approval requests' version at the last look,
	// nextExpiry the earliest expiry of a granted approval the approval
	// resources showed (zero: none).
	apprVersion int64
	nextExpiry  time.Time

	// subscribed is set by the first subscription admitted. Until then no
	// session can be subscribed to anything (the SDK records a
	// subscription only after subscribe admits it), so a change is not
	// queued: the acts of an instance whose agents do not subscribe cost
	// the notifier nothing.
	subscribed atomic.Bool
	// apprSubscribed is set by the first subscription to an approval
	// resource: the poll reads nothing before.
	apprSubscribed atomic.Bool
}

// serve registers the resources on srv and runs the notifier until ctx
// ends.
func (r *resources) serve(ctx context.Context, srv *sdk.Server, agentID string) {
	r.srv, r.agent = srv, agentID
	if r.src != nil {
		srv.AddResource(&sdk.Resource{URI: InboxURI, Name: "inbox", Title: "Offers waiting for you", MIMEType: "application/json",
			Description: "The counterparties' offers you can still accept, as list_inbox returns them without a mandate. Subscribe to hear when one arrives or is withdrawn."}, r.read)
		srv.AddResource(&sdk.Resource{URI: TransactionsURI, Name: "transactions", Title: "Your transactions", MIMEType: "application/json",
			Description: "The most recently updated transactions, as list_transactions returns them."}, r.read)
		srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: TransactionURITemplate, Name: "transaction", Title: "A transaction's record", MIMEType: "application/json",
			Description: "One transaction's record as this instance holds it, as get_transaction_record returns it. Subscribe to hear when the counterparty acts or the state changes."}, r.read)
	}
	if r.appr != nil {
		srv.AddResource(&sdk.Resource{URI: ApprovalsURI, Name: "approvals", Title: "Your approval requests", MIMEType: "application/json",
			Description: "Your latest approval requests, newest first, each as approval_status returns it: pending, approved (with approval_id and expires_at), rejected or expired. Subscribe to hear when your principal decides one."}, r.read)
		srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: ApprovalURITemplate, Name: "approval", Title: "One approval request", MIMEType: "application/json",
			Description: "One of your approval requests, as approval_status returns it. Subscribe to hear when your principal approves or rejects it, or the approval expires."}, r.read)
	}
	cancel := func() {}
	if r.src != nil {
		cancel = r.src.Subscribe(r.heard)
	}
	go func() {
		defer cancel()
		r.run(ctx)
	}()
}

// heard queues a change and returns at once: the engine's commit is never
// held up by a slow or absent client. Which of the resources it touched
// did change is for the notifier to find.
func (r *resources) heard(c record.Change) {
	if !r.subscribed.Load() {
		return
	}
	r.mu.Lock()
	r.dirty[TransactionURIPrefix+c.TransactionID] = true
	r.dirty[TransactionsURI] = true
	r.dirty[InboxURI] = true
	r.mu.Unlock()
	r.poke()
}

func (r *resources) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *resources) run(ctx context.Context) {
	var tick <-chan time.Time
	if r.appr != nil {
		t := time.NewTicker(ApprovalPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick:
			if !r.approvalsMoved(ctx) {
				continue
			}
		}
		r.pass(ctx)
	}
}

// approvalsMoved reports whether the approval resources may read
// differently than at the last look (a request filed or decided, by any
// process, or an approval's expiry reached), marking the subscribed ones
// to be read.
func (r *resources) approvalsMoved(ctx context.Context) bool {
	if !r.apprSubscribed.Load() {
		return false
	}
	v, err := r.appr.ApprovalsVersion(ctx)
	if err != nil {
		r.log.Warn("mcp: reading the approval requests' version failed", "error", err)
		return false
	}
	now := r.appr.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	expired := !r.nextExpiry.IsZero() && !now.Before(r.nextExpiry)
	if v == r.apprVersion && !expired {
		return false
	}
	r.apprVersion = v
	if expired {
		// The pass below finds the next one among the approvals still
		// granted.
		r.nextExpiry = time.Time{}
	}
	for uri := range r.subs {
		if isApproval(uri) {
			r.dirty[uri] = true
		}
	}
	return true
}

// pass reads every subscribed resource that may have changed and
// announces those whose content did.
func (r *resources) pass(ctx context.Context) {
	r.mu.Lock()
	r.dropClosed()
	var uris []string
	for uri := range r.dirty {
		if len(r.subs[uri]) > 0 {
			uris = append(uris, uri)
		}
	}
	clear(r.dirty)
	r.mu.Unlock()
	slices.Sort(uris)
	for _, uri := range uris {
		sum, exp, err := r.fingerprint(ctx, uri)
		if err != nil {
			// Unread, it may have changed: announce it; the hash kept
			// is the last one read. An approval resource is read again
			// at the next poll, its expiry being unknown.
			r.log.Warn("mcp: reading a subscribed resource failed", "uri", uri, "error", err)
			if isApproval(uri) {
				r.mu.Lock()
				r.apprVersion = -1
				r.mu.Unlock()
			}
			r.notify(ctx, uri)
			continue
		}
		r.mu.Lock()
		prev, had := r.sent[uri]
		if len(r.subs[uri]) > 0 { // not unsubscribed meanwhile
			r.sent[uri] = sum
		}
		r.expiresAt(exp)
		r.mu.Unlock()
		if !had || prev != sum {
			r.notify(ctx, uri)
		}
	}
}

// dropClosed forgets the subscriptions of sessions that ended (a client
// that went away without unsubscribing), and the hashes of resources no
// session is subscribed to any more. r.mu is held.
func (r *resources) dropClosed() {
	if r.srv == nil {
		return
	}
	live := map[*sdk.ServerSession]bool{}
	for ss := range r.srv.Sessions() {
		live[ss] = true
	}
	for uri, ss := range r.subs {
		for s := range ss {
			if !live[s] {
				delete(ss, s)
			}
		}
		if len(ss) == 0 {
			delete(r.subs, uri)
			delete(r.sent, uri)
		}
	}
}

// expiresAt brings the next expiry the poll waits for forward to the
// earliest of exp; it moves later only once reached (approvalsMoved).
// r.mu is held.
func (r *resources) expiresAt(exp []string) {
	for _, s := range exp {
		t, err := envelope.ParseTimestamp(s)
		if err == nil && (r.nextExpiry.IsZero() || t.Before(r.nextExpiry)) {
			r.nextExpiry = t
		}
	}
}

func (r *resources) notify(ctx context.Context, uri string) {
	if err := r.srv.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		r.log.Warn("mcp: resource update notification failed", "uri", uri, "error", err)
	}
}

// errGone is what content answers for a resource that does not exist.
var errGone = errors.New("mcp: no such resource")

// gone is the hash of a resource that no longer exists (a transaction a
// refused first act removed): a change like any other.
var gone = sha256.Sum256(nil)

// fingerprint hashes uri's content as a read returns it (gone when the
// resource does not exist), with the expiry of each granted approval it
// shows.
func (r *resources) fingerprint(ctx context.Context, uri string) ([sha256.Size]byte, []string, error) {
	v, err := r.content(ctx, uri)
	if errors.Is(err, errGone) {
		return gone, nil, nil
	}
	if err != nil {
		return [sha256.Size]byte{}, nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}, nil, err
	}
	var exp []string
	switch x := v.(type) {
	case ApprovalsResult:
		for _, a := range x.ApprovalRequests {
			exp = appendExpiry(exp, a)
		}
	case agent.ApprovalStatusResult:
		exp = appendExpiry(exp, x)
	}
	return sha256.Sum256(b), exp, nil
}

// appendExpiry adds a's expiry when it is granted and not yet expired: the
// moment its status turns to expired.
func appendExpiry(exp []string, a agent.ApprovalStatusResult) []string {
	if a.Status == store.ApprovalApproved && a.ExpiresAt != "" {
		return append(exp, a.ExpiresAt)
	}
	return exp
}

func isApproval(uri string) bool {
	return uri == ApprovalsURI || strings.HasPrefix(uri, ApprovalURIPrefix)
}

// content is what a read of uri answers: the value its JSON is, or errGone
// when no such resource exists (for this agent).
func (r *resources) content(ctx context.Context, uri string) (any, error) {
	var v any
	var err error
	switch {
	case r.src != nil && uri == TransactionsURI:
		v, err = r.src.ListTransactions(ctx, readmodel.ListFilter{})
	case r.src != nil && uri == InboxURI:
		// Read as the server's agent: the inbox holds only the offers
		// addressed to it, as list_inbox does.
		var a record.Actor
		if a, err = r.src.Agent(r.agent); err == nil {
			var items []readmodel.InboxItem
			items, err = r.src.Inbox(ctx, a, "", 0)
			v = InboxResult{Offers: items}
		}
	case r.src != nil && strings.HasPrefix(uri, TransactionURIPrefix):
		v, err = r.src.Transaction(ctx, strings.TrimPrefix(uri, TransactionURIPrefix))
	case r.appr != nil && uri == ApprovalsURI:
		var items []agent.ApprovalStatusResult
		items, err = r.appr.Approvals(ctx)
		v = ApprovalsResult{ApprovalRequests: items}
	case r.appr != nil && strings.HasPrefix(uri, ApprovalURIPrefix):
		v, err = r.appr.ApprovalStatus(ctx, strings.TrimPrefix(uri, ApprovalURIPrefix))
	default:
		return nil, errGone
	}
	var refused *reason.Refusal
	if errors.As(err, &refused) {
		// An unknown transaction, another agent's approval request.
		return nil, errGone
	}
	return v, err
}

// subscribe admits a subscription to a resource that exists, and keeps
// its content's hash as it stands when the first subscription to it
// begins: the client reads it after subscribing, so only a later change is
// news.
func (r *resources) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	sum, exp, err := r.fingerprint(ctx, uri)
	if err != nil {
		return err
	}
	if sum == gone {
		return sdk.ResourceNotFoundError(uri)
	}
	approval := isApproval(uri)
	if approval && r.appr != nil && !r.apprSubscribed.Load() {
		// The version the poll compares against: what a subscriber
		// reads is no older.
		if v, err := r.appr.ApprovalsVersion(ctx); err == nil {
			r.mu.Lock()
			r.apprVersion = v
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	if len(r.subs[uri]) == 0 {
		r.subs[uri] = map[*sdk.ServerSession]bool{}
		r.sent[uri] = sum
	}
	r.subs[uri][req.Session] = true
	if approval {
		r.expiresAt(exp)
	}
	r.mu.Unlock()
	r.subscribed.Store(true)
	if approval {
		r.apprSubscribed.Store(true)
	}
	return nil
}

func (r *resources) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	uri := req.Params.URI
	delete(r.subs[uri], req.Session)
	if len(r.subs[uri]) == 0 {
		delete(r.subs, uri)
		delete(r.sent, uri)
	}
	return nil
}

func (r *resources) read(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	v, err := r.content(ctx, uri)
	if errors.Is(err, errGone) {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
