// Package bridge connects an MCP client that speaks over standard input
// and output to a running `party serve`'s Streamable HTTP endpoint: the
// `party mcp` command. It holds no record, no engine and no key; it
// reads only the endpoint's address and the agent token, and forwards
// messages, so a client launched over stdio uses the one record engine
// that serve runs on the database, and sees exactly the tools (and the
// instructions, capabilities and notifications) serve offers.
//
// # What is forwarded
//
// Every JSON-RPC message, both ways, unchanged in meaning: the client's
// requests, notifications and responses (to the server's own requests,
// such as roots/list or elicitation) are each POSTed to the endpoint; the
// server's responses, notifications and requests come back from the
// streams those POSTs open and, for sessions on protocol versions before
// 2026-07-28, from the standalone stream (an HTTP GET) the bridge opens
// once the client has sent notifications/initialized — which is where a
// server sends what no request asked for, such as resources/updated or
// tools/list_changed. The client's next message is forwarded once that
// stream has answered (or will not be opened), at most five seconds
// later: a call made at once could otherwise have serve ask or tell the
// client something before the stream exists, and serve drops it. From 2026-07-28 on such notifications travel on the
// client's own subscriptions/listen request, which is forwarded like any
// other. A JSON-RPC batch from the client is split into its messages and
// their responses are batched again on the way back.
//
// # Why transports, not a client and a server
//
// The bridge is built from the go-sdk's two transports, not from its
// Client and Server: a proxy made of an sdk.Client towards serve and an
// sdk.Server towards the client would answer the client's initialize
// itself, re-declare serve's tools, and pass on only what it was written
// to mirror. The transports carry messages without interpreting them, so
// nothing needs mirroring and nothing can be lost. The go-sdk's stdio
// transport reads and writes newline-delimited JSON on the given streams
// (with its frame limit and batch handling); its Streamable HTTP client
// transport POSTs, reads JSON and SSE replies, resumes a broken reply
// stream with Last-Event-ID, keeps the Mcp-Session-Id and ends the session
// with DELETE when the bridge stops.
//
// That transport expects its sdk.Client to tell it, after the handshake,
// which protocol version was negotiated, and to start the standalone
// stream then; its hook for that is unexported. The bridge does those two
// things itself: it reads the negotiated version from the handshake it
// forwards (the initialize result's protocolVersion, or the version a
// successful server/discover asked for) and sends it as
// Mcp-Protocol-Version on requests that lack it, and it runs the
// standalone stream; for a 2026-07-28 session it also sets the Mcp-Method
// and Mcp-Name headers on a request that carries no version of its own.
// Tool argument headers (x-mcp-header) are not derived: party's tools
// declare none.
//
// # Order, failures and the token
//
// Messages reach serve in the order the client wrote them: the next POST
// starts only when the previous request's body has been sent, while the
// replies stream back concurrently. When serve cannot be reached at the
// start, Run returns ErrNotRunning at once. A request serve cannot be
// given is answered to the client with a JSON-RPC error; a connection
// refused, a token refused (HTTP 401 or 403) or a session serve no longer
// knows (it restarted) ends the bridge with an error naming the cause.
// The token is sent only to the endpoint's own host, never through a
// proxy or a redirect, and never logged; the log names methods and ids,
// never a message's content.
package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Why a bridge ends. Each is wrapped with what happened; test with
// errors.Is.
var (
	// ErrNotRunning: nothing accepts connections at the endpoint's
	// address (serve is not running there).
	ErrNotRunning = errors.New("bridge: nothing is listening at the MCP endpoint")
	// ErrTokenRefused: the endpoint answered 401 or 403 to the token.
	ErrTokenRefused = errors.New("bridge: the MCP endpoint refused the token")
	// ErrSessionGone: the endpoint no longer knows the session (serve
	// restarted); the client must connect again.
	ErrSessionGone = errors.New("bridge: the MCP endpoint no longer knows this session")
)

// Options configure Run.
type Options struct {
	// Endpoint is the Streamable HTTP endpoint, http://host:port/mcp.
	Endpoint string
	// Token is the bearer token sent to the endpoint.
	Token string
	// Logger receives the bridge's log; nil discards it.
	Logger *slog.Logger
	// DialTimeout bounds the first connection to the endpoint (default
	// 3 s).
	DialTimeout time.Duration
}

// Versions and headers of the Streamable HTTP transport.
const (
	protocolVersionHeader = "Mcp-Protocol-Version"
	sessionIDHeader       = "Mcp-Session-Id"
	lastEventIDHeader     = "Last-Event-ID"
	methodHeader          = "Mcp-Method"
	nameHeader            = "Mcp-Name"
	// version20260728 is the first protocol version without the
	// standalone stream (SEP-2575).
	version20260728 = "2026-07-28"
	// metaProtocolVersion is the _meta member that carries a request's
	// protocol version from 2026-07-28 on.
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// maxEvent bounds one server-sent event of the standalone stream, like
	// the stdio side's frame limit.
	maxEvent = sdk.DefaultMaxLineLength
	// listenRetries bounds reconnections of the standalone stream that
	// bring nothing new.
	listenRetries = 5
)

// Run forwards messages between the client on in and out and the
// endpoint until the client closes in (nil), ctx ends (ctx.Err()), or
// either side fails (an error wrapping one of the Err values when the
// cause is known).
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options) error {
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bridge: endpoint %q is not an http(s) URL", o.Endpoint)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	timeout := o.DialTimeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotRunning, addr, err)
	}
	conn.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &bridge{endpoint: o.Endpoint, addr: addr, log: log, failc: make(chan error, 1), calls: map[jsonrpc.ID]handshake{}, opened: make(chan struct{})}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil // the token goes to the endpoint itself, never to a proxy
	b.http = &http.Client{
		Transport: &tokenTransport{base: base, host: u.Host, token: o.Token, b: b},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the MCP endpoint redirected; party serve never does")
		},
	}
	st, err := (&sdk.StreamableClientTransport{Endpoint: o.Endpoint, HTTPClient: b.http, DisableStandaloneSSE: true}).Connect(ctx)
	if err != nil {
		return err
	}
	b.server = st
	cl, err := (&sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}).Connect(ctx)
	if err != nil {
		st.Close()
		return err
	}
	b.client = cl
	log.Info("party mcp bridging stdio to party serve", "endpoint", o.Endpoint)

	up := make(chan error, 1)
	down := make(chan error, 1)
	go func() { up <- b.up(ctx) }()
	go func() { down <- b.down(ctx) }()
	var end error
	select {
	case end = <-up:
	case end = <-down:
	case end = <-b.failc:
	case <-ctx.Done():
		end = ctx.Err()
	}
	if f := b.fatal(); f != nil && end == nil {
		// The client may close its side on reading the error a failure
		// answered its call with, before the failure is signalled.
		end = f
	}
	cancel()
	// Closing the HTTP side ends the session on the endpoint (DELETE),
	// then stops every stream; the stdio side needs no more than that.
	st.Close()
	cl.Close()
	return end
}

type bridge struct {
	endpoint, addr string
	log            *slog.Logger
	http           *http.Client
	server, client sdk.Connection

	mu       sync.Mutex
	version  string                   // the session's protocol version, once known
	calls    map[jsonrpc.ID]handshake // handshake calls forwarded, by id
	cause    error                    // what the endpoint's answers showed, for a failure's message
	listened bool                     // the standalone stream was started
	// opened is closed once the standalone stream's first answer came
	// (or none will): what the server sends outside a call's own answer
	// before then has no stream to travel on (up).
	opened     chan struct{}
	openedOnce sync.Once

	failed   error // the first failure, once known
	failOnce sync.Once
	failc    chan error
}

// record notes err as the failure the bridge ends with, without ending it
// yet; the first recorded failure wins.
func (b *bridge) record(err error) {
	b.mu.Lock()
	if b.failed == nil {
		b.failed = err
	}
	b.mu.Unlock()
}

func (b *bridge) fatal() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

// fail ends the bridge with err (or the failure recorded before it).
func (b *bridge) fail(err error) {
	b.record(err)
	b.failOnce.Do(func() { b.failc <- b.fatal() })
}

func (b *bridge) setCause(err error) {
	b.mu.Lock()
	if b.cause == nil {
		b.cause = err
	}
	b.mu.Unlock()
}

// explain says why a send or a stream failed when the failure ends the
// bridge: the cause the endpoint's answers showed (a refused token), a
// refused connection, or a session the endpoint forgot. It returns nil
// for a failure of one request only.
func (b *bridge) explain(err error) error {
	b.mu.Lock()
	cause := b.cause
	b.mu.Unlock()
	switch {
	case cause != nil:
		return cause
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: %s stopped answering", ErrNotRunning, b.addr)
	case errors.Is(err, sdk.ErrSessionMissing):
		return fmt.Errorf("%w (did party serve restart?); restart the MCP client to open a new session", ErrSessionGone)
	}
	return nil
}

// up reads the client's messages and forwards each, in order.
func (b *bridge) up(ctx context.Context) error {
	for {
		msg, err := b.client.Read(ctx)
		if errors.Is(err, io.EOF) {
			b.log.Info("the MCP client closed its input")
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("bridge: reading the client's message: %w", err)
		}
		b.observeUp(msg)
		sent := make(chan struct{})
		var once sync.Once
		markSent := func() { once.Do(func() { close(sent) }) }
		go func() {
			err := b.server.Write(context.WithValue(ctx, forwardingKey{}, forwarding{msg: msg, sent: markSent}), msg)
			markSent()
			b.written(ctx, msg, err)
		}()
		select {
		case <-sent:
		case <-ctx.Done():
			return ctx.Err()
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/initialized" {
			// The client's next call may make the server ask it
			// something (roots) or notify it, on the standalone stream:
			// forward it once that stream is open, or surely not coming.
			select {
			case <-b.opened:
			case <-time.After(listenWait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// listenWait bounds how long the client's first call after the
// handshake waits for the standalone stream to open.
const listenWait = 5 * time.Second

// streamOpened says the standalone stream answered, or will not be opened.
func (b *bridge) streamOpened() { b.openedOnce.Do(func() { close(b.opened) }) }

// written handles the outcome of forwarding msg to the endpoint.
func (b *bridge) written(ctx context.Context, msg jsonrpc.Message, err error) {
	req, isReq := msg.(*jsonrpc.Request)
	if err == nil {
		if isReq && req.Method == "notifications/initialized" {
			b.startListen(ctx)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	fatal := b.explain(err)
	b.log.Warn("party mcp could not forward a message to party serve", "message", describe(msg), "error", err)
	if fatal != nil {
		b.record(fatal)
	}
	if isReq && req.IsCall() {
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			detail := err
			if fatal != nil {
				detail = fatal
			}
			wire = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "party mcp could not deliver this request to party serve: " + detail.Error()}
		}
		if werr := b.client.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: wire}); werr != nil {
			b.fail(fmt.Errorf("bridge: writing to the client: %w", werr))
			return
		}
	}
	if fatal != nil {
		b.fail(fatal)
	}
}

// down writes what the endpoint sends back on the streams of the
// client's requests to the client.
func (b *bridge) down(ctx context.Context) error {
	for {
		msg, err := b.server.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if fatal := b.explain(err); fatal != nil {
				return fatal
			}
			return fmt.Errorf("bridge: the connection to party serve failed: %w", err)
		}
		b.observeDown(msg)
		if err := b.client.Write(ctx, msg); err != nil {
			return fmt.Errorf("bridge: writing to the client: %w", err)
		}
	}
}

// observeUp notes the handshake calls, whose answers settle the
// session's protocol version: initialize, and server/discover with the
// version its _meta asks for.
func (b *bridge) observeUp(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	b.log.Debug("client → serve", "message", describe(msg))
	if !req.IsCall() || (req.Method != "initialize" && req.Method != "server/discover") {
		return
	}
	c := handshake{method: req.Method}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(req.Params, &p) == nil {
		c.version, _ = p.Meta[metaProtocolVersion].(string)
	}
	b.mu.Lock()
	b.calls[req.ID] = c
	b.mu.Unlock()
}

// handshake is a forwarded initialize or server/discover call.
type handshake struct {
	method  string
	version string // what server/discover asked for
}

// observeDown settles the session's protocol version from the answer to a
// handshake call: the version an initialize result names, or the one a
// successful server/discover was asked for when the server supports it.
func (b *bridge) observeDown(msg jsonrpc.Message) {
	b.log.Debug("serve → client", "message", describe(msg))
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return
	}
	b.mu.Lock()
	c, found := b.calls[resp.ID]
	delete(b.calls, resp.ID)
	b.mu.Unlock()
	if !found || resp.Error != nil {
		return
	}
	var r struct {
		ProtocolVersion   string   `json:"protocolVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(resp.Result, &r) != nil {
		return
	}
	switch {
	case c.method == "initialize" && r.ProtocolVersion != "":
		b.setVersion(r.ProtocolVersion)
	case c.method == "server/discover" && c.version != "" && slices.Contains(r.SupportedVersions, c.version):
		b.setVersion(c.version)
	}
}

func (b *bridge) setVersion(v string) {
	b.mu.Lock()
	b.version = v
	b.mu.Unlock()
}

func (b *bridge) protocolVersion() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.version
}

// describe names a message for the log: its kind, method and id, never
// its parameters or result.
func describe(msg jsonrpc.Message) string {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			return fmt.Sprintf("request %s #%v", m.Method, m.ID.Raw())
		}
		return "notification " + m.Method
	case *jsonrpc.Response:
		return fmt.Sprintf("response #%v", m.ID.Raw())
	}
	return fmt.Sprintf("%T", msg)
}

// startListen opens the standalone stream, once, for a session on a
// protocol version that has one.
func (b *bridge) startListen(ctx context.Context) {
	v := b.protocolVersion()
	b.mu.Lock()
	start := !b.listened && v != "" && v < version20260728
	b.listened = b.listened || start
	b.mu.Unlock()
	if start {
		go b.listen(ctx)
	} else {
		b.streamOpened()
	}
}

// listen runs the standalone stream: a GET on the endpoint whose
// server-sent events are messages for the client, resumed with
// Last-Event-ID when it breaks (after 250 ms, doubling up to 4 s), given
// up after listenRetries attempts in a row that bring nothing new.
func (b *bridge) listen(ctx context.Context) {
	lastID := ""
	failures := 0
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.endpoint, nil)
		if err != nil {
			b.fail(err)
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if sid := b.server.SessionID(); sid != "" {
			req.Header.Set(sessionIDHeader, sid)
		}
		if lastID != "" {
			req.Header.Set(lastEventIDHeader, lastID)
		}
		resp, err := b.http.Do(req)
		b.streamOpened()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Serve may be restarting: try again, and when it is back the
			// answer says whether it still knows the session.
			failures++
			if failures > listenRetries {
				if fatal := b.explain(err); fatal != nil {
					b.fail(fatal)
				} else {
					b.fail(fmt.Errorf("bridge: the standalone stream from party serve: %w", err))
				}
				return
			}
		} else {
			ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			switch {
			case resp.StatusCode == http.StatusNotFound && b.server.SessionID() != "":
				resp.Body.Close()
				b.fail(fmt.Errorf("%w (did party serve restart?); restart the MCP client to open a new session", ErrSessionGone))
				return
			case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
				resp.Body.Close()
				b.fail(fmt.Errorf("%w (HTTP %d)", ErrTokenRefused, resp.StatusCode))
				return
			case resp.StatusCode != http.StatusOK || ct != "text/event-stream":
				// The endpoint offers no standalone stream (405 is
				// how the transport says so): nothing to forward.
				resp.Body.Close()
				b.log.Debug("party serve offers no standalone stream", "status", resp.StatusCode)
				return
			}
			before := lastID
			if err := b.events(ctx, resp.Body, &lastID); err != nil {
				resp.Body.Close()
				b.fail(err)
				return
			}
			resp.Body.Close()
			if lastID != before {
				failures = 0
			} else {
				failures++
			}
		}
		if failures > listenRetries {
			b.fail(fmt.Errorf("bridge: the standalone stream from party serve broke %d times without a new event", failures))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond << min(failures, 4)):
		}
	}
}

// events reads server-sent events from body until it ends, writing each
// message event's data to the client and keeping the last event id. A
// body that breaks is not an error (the caller resumes); data that is not
// a JSON-RPC message is.
func (b *bridge) events(ctx context.Context, body io.Reader, lastID *string) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEvent)
	var name string
	var data bytes.Buffer
	dispatch := func() error {
		defer func() { name = ""; data.Reset() }()
		if data.Len() == 0 || (name != "" && name != "message") {
			return nil
		}
		msg, err := jsonrpc.DecodeMessage(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
		if err != nil {
			return fmt.Errorf("bridge: party serve sent an event that is not a JSON-RPC message: %v", err)
		}
		b.observeDown(msg)
		return b.client.Write(ctx, msg)
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			*lastID = value
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return fmt.Errorf("bridge: an event from party serve exceeds %d bytes", maxEvent)
	}
	return nil
}

// forwardingKey marks a write's context with the message being forwarded
// and the function to call once its request body is on its way, so that
// the next message waits for it.
type forwardingKey struct{}

type forwarding struct {
	msg  jsonrpc.Message
	sent func()
}

// tokenTransport adds the token to requests for the endpoint's host,
// fills in the session's protocol version (and, from 2026-07-28 on, the
// Mcp-Method and Mcp-Name headers that go with it, which the go-sdk
// transport sets only when it knows the version), reports when a request
// body has been sent, and notes a refused token.
type tokenTransport struct {
	base  http.RoundTripper
	host  string
	token string
	b     *bridge
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if r.URL.Host != t.host {
		return nil, fmt.Errorf("bridge: refusing to send the token to %s, which is not the MCP endpoint's host", r.URL.Host)
	}
	r.Header.Set("Authorization", "Bearer "+t.token)
	if r.Header.Get(protocolVersionHeader) == "" {
		if v := t.b.protocolVersion(); v != "" {
			r.Header.Set(protocolVersionHeader, v)
		}
	}
	if f, ok := r.Context().Value(forwardingKey{}).(forwarding); ok {
		if req, ok := f.msg.(*jsonrpc.Request); ok && r.Header.Get(protocolVersionHeader) >= version20260728 && r.Header.Get(methodHeader) == "" {
			r.Header.Set(methodHeader, req.Method)
			if name := nameOf(req); name != "" {
				r.Header.Set(nameHeader, name)
			}
		}
		if r.Body == nil || r.Body == http.NoBody {
			f.sent()
		} else {
			r.Body = &sentBody{ReadCloser: r.Body, mark: f.sent}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.b.setCause(fmt.Errorf("%w (HTTP %d): the agent token does not open %s; is party serve running from the same state directory?", ErrTokenRefused, resp.StatusCode, t.b.endpoint))
	}
	return resp, err
}

// nameOf is what the Mcp-Name header carries for req: the tool's or
// prompt's name, or the resource's URI.
func nameOf(req *jsonrpc.Request) string {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return ""
	}
	switch req.Method {
	case "tools/call", "prompts/get":
		return p.Name
	case "resources/read":
		return p.URI
	}
	return ""
}

// sentBody calls mark once the request body has been read to its end or
// closed.
type sentBody struct {
	io.ReadCloser
	mark func()
}

func (s *sentBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if err != nil {
		s.mark()
	}
	return n, err
}

func (s *sentBody) Close() error {
	s.mark()
	return s.ReadCloser.Close()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
