package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/bindings/mcp/bridge"
)

const (
	agentToken = "agent-token-0123456789abcdefghijklmnopqrstuvwxyz"
	adminToken = "admin-token-0123456789abcdefghijklmnopqrstuvwxyz"
	resource   = "party://test/resource"
)

type echoIn struct {
	Text string `json:"text"`
}

type echoOut struct {
	Text string `json:"text"`
}

type rootsOut struct {
	Roots []string `json:"roots"`
}

// testServer is an MCP server behind the agent token, as serve's /mcp is,
// with tools that echo and that ask the client for its roots (a request
// from server to client), and a resource a client can subscribe to.
func testServer(t *testing.T, stateless bool) (*sdk.Server, *httptest.Server) {
	s, hs, _ := testServerHeaders(t, stateless)
	return s, hs
}

// versionLog records the Mcp-Protocol-Version header of every request
// that belongs to a session (stateful: carries its Mcp-Session-Id;
// stateless: every request).
type versionLog struct {
	mu       sync.Mutex
	versions []string
}

func (v *versionLog) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.versions...)
}

func testServerHeaders(t *testing.T, stateless bool) (*sdk.Server, *httptest.Server, *versionLog) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "test-serve", Version: "1"}, &sdk.ServerOptions{
		Instructions:       "the server's own instructions",
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, echoOut, error) {
		return nil, echoOut(in), nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "roots", Description: "lists the client's roots"}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, rootsOut, error) {
		//lint:ignore SA1019 the bridge forwards roots for clients on protocol versions before their deprecation
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, rootsOut{}, err
		}
		out := rootsOut{Roots: []string{}}
		for _, r := range res.Roots {
			out.Roots = append(out.Roots, r.URI)
		}
		return nil, out, nil
	})
	s.AddResource(&sdk.Resource{URI: resource, Name: "resource", MIMEType: "text/plain"}, func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: resource, Text: "hello"}}}, nil
	})
	var h http.Handler = mcp.Handler(s, agentToken, adminToken)
	if stateless {
		// Only a stateless handler speaks 2026-07-28 (SEP-2575); serve's
		// is stateful.
		h = mcp.RequireToken(agentToken, adminToken, "", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true}))
	}
	vl := &versionLog{}
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stateless || r.Header.Get("Mcp-Session-Id") != "" {
			vl.mu.Lock()
			vl.versions = append(vl.versions, r.Method+" "+r.Header.Get("Mcp-Protocol-Version"))
			vl.mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return s, hs, vl
}

// syncBuffer is a log sink the bridge writes to from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bridged starts Run between pipes and returns the client's transport, the
// channel Run's result arrives on, and the bridge's debug log.
func bridged(t *testing.T, endpoint, token string) (sdk.Transport, <-chan error, *syncBuffer) {
	t.Helper()
	toBridge, fromClient := io.Pipe()
	toClient, fromBridge := io.Pipe()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		err := bridge.Run(context.Background(), toBridge, fromBridge, bridge.Options{
			Endpoint: endpoint, Token: token,
			Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		fromBridge.CloseWithError(io.EOF)
		toBridge.Close()
		done <- err
	}()
	// A test that stops early still ends the bridge, so that the test
	// server's Close is not left waiting for its streams.
	t.Cleanup(func() { fromClient.Close() })
	return &sdk.IOTransport{Reader: toClient, Writer: fromClient}, done, logs
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the bridge did not end")
		return nil
	}
}

func toolsJSON(t *testing.T, ctx context.Context, cs *sdk.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBridgeForwardsEverything drives a client through the bridge on each
// protocol version the go-sdk speaks over Streamable HTTP: the handshake
// (the server's own instructions arrive), the same tools/list a direct
// client gets, a tool call, a request from the server to the client and
// the client's answer (roots/list inside a tool call), and notifications
// the server sends unasked: tools/list_changed, and resources/updated for
// a subscribed resource. Closing the client's side ends the bridge with
// nil, and the log never holds the token.
func TestBridgeForwardsEverything(t *testing.T) {
	for _, c := range []struct {
		name, version string
		stateless     bool
	}{
		{"default", "", false},
		{"2025-11-25", "2025-11-25", false},
		{"2025-06-18", "2025-06-18", false},
		{"2025-03-26", "2025-03-26", false},
		{"stateless-default", "", true},
	} {
		version := c.version
		t.Run(c.name, func(t *testing.T) {
			server, hs, versions := testServerHeaders(t, c.stateless)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			endpoint := hs.URL + "/mcp"

			direct, err := sdk.NewClient(&sdk.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
				&sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer(agentToken)}},
				&sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			want := toolsJSON(t, ctx, direct)
			direct.Close()

			listChanged := make(chan struct{}, 1)
			updated := make(chan string, 1)
			client := sdk.NewClient(&sdk.Implementation{Name: "bridged", Version: "1"}, &sdk.ClientOptions{
				ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
					select {
					case listChanged <- struct{}{}:
					default:
					}
				},
				ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
					select {
					case updated <- r.Params.URI:
					default: // the test sends several; one is enough
					}
				},
			})
			//lint:ignore SA1019 the bridge forwards roots for clients on protocol versions before their deprecation
			client.AddRoots(&sdk.Root{URI: "file:///work/acme", Name: "acme"})
			transport, done, logs := bridged(t, endpoint, agentToken)
			cs, err := client.Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect through the bridge: %v\n%s", err, logs)
			}
			if got := cs.InitializeResult(); got == nil || got.Instructions != "the server's own instructions" || got.ServerInfo == nil || got.ServerInfo.Name != "test-serve" {
				t.Fatalf("handshake result %+v", got)
			}
			if got := toolsJSON(t, ctx, cs); got != want {
				t.Fatalf("tools through the bridge:\n%s\nwant:\n%s", got, want)
			}
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ünïcode ✓"}})
			if err != nil || res.IsError {
				t.Fatalf("echo: %+v %v", res, err)
			}
			if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"text":"ünïcode ✓"}` {
				t.Fatalf("echo returned %s", b)
			}
			if !c.stateless {
				// From 2026-07-28 on a server asks the client within its
				// result (multi-round-trip requests), not by a request
				// of its own.
				res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "roots", Arguments: map[string]any{}})
				if err != nil || res.IsError {
					t.Fatalf("roots: %v, %s\n%s", err, resultText(res), logs)
				}
				if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"roots":["file:///work/acme"]}` {
					t.Fatalf("roots returned %s", b)
				}
			}

			// Unasked notifications.
			if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: resource}); err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			deadline := time.After(10 * time.Second)
			for got := ""; got != resource; {
				// The standalone stream may open a moment after the
				// handshake; a notification sent before it is not
				// replayed, so send until one arrives.
				if err := server.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: resource}); err != nil {
					t.Fatal(err)
				}
				select {
				case got = <-updated:
				case <-time.After(200 * time.Millisecond):
				case <-deadline:
					t.Fatalf("no resources/updated through the bridge\n%s", logs)
				}
			}
			sdk.AddTool(server, &sdk.Tool{Name: "late", Description: "added after the handshake"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, struct{}, error) {
				return nil, struct{}{}, nil
			})
			select {
			case <-listChanged:
			case <-time.After(10 * time.Second):
				t.Fatalf("no tools/list_changed through the bridge\n%s", logs)
			}
			if got := toolsJSON(t, ctx, cs); !strings.Contains(got, `"name":"late"`) {
				t.Fatalf("tools after the change: %s", got)
			}

			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			if err := waitRun(t, done); err != nil {
				t.Fatalf("Run after the client closed: %v", err)
			}
			// Every request of the session, the direct client's and the
			// bridge's alike, stated the negotiated version.
			negotiated := cs.InitializeResult().ProtocolVersion
			if version != "" && negotiated != version {
				t.Fatalf("negotiated %s, asked for %s", negotiated, version)
			}
			for _, v := range versions.all() {
				if _, got, _ := strings.Cut(v, " "); got != negotiated {
					t.Errorf("a request of a %s session stated %q", negotiated, v)
				}
			}
			if strings.Contains(logs.String(), agentToken) {
				t.Fatal("the token is in the log")
			}
			if strings.Contains(logs.String(), "ünïcode") {
				t.Fatal("a message's content is in the log")
			}
		})
	}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestBridgeNotRunning: nothing listening at the endpoint is
// ErrNotRunning at once, before the client's first message is read.
func TestBridgeNotRunning(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	err = bridge.Run(context.Background(), strings.NewReader(""), io.Discard, bridge.Options{Endpoint: "http://" + addr + "/mcp", Token: agentToken})
	if !errors.Is(err, bridge.ErrNotRunning) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Run with nothing at %s: %v", addr, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	if strings.Contains(err.Error(), agentToken) {
		t.Fatal("the token is in the error")
	}
}

// TestBridgeTokenRefused: the admin token (403) and a wrong one (401) end
// the bridge with ErrTokenRefused, after the client's initialize is
// answered with an error rather than left hanging; neither token is in
// the error or the log.
func TestBridgeTokenRefused(t *testing.T) {
	_, hs := testServer(t, false)
	for _, tok := range []string{adminToken, "not-the-token-0123456789abcdefghijklmnop"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		transport, done, logs := bridged(t, hs.URL+"/mcp", tok)
		_, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		cancel()
		if err == nil {
			t.Fatal("connected with a refused token")
		}
		runErr := waitRun(t, done)
		if !errors.Is(runErr, bridge.ErrTokenRefused) {
			t.Fatalf("Run: %v", runErr)
		}
		for _, s := range []string{runErr.Error(), logs.String(), err.Error()} {
			if strings.Contains(s, tok) {
				t.Fatalf("the token is in %q", s)
			}
		}
	}
}

// TestBridgeServeStops: when the endpoint goes away mid-session, the next
// call is answered with an error and the bridge ends with ErrNotRunning,
// instead of leaving the client waiting.
func TestBridgeServeStops(t *testing.T) {
	server, _ := testServer(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.Handler(server, agentToken, adminToken)}
	go srv.Serve(l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	transport, done, logs := bridged(t, "http://"+l.Addr().String()+"/mcp", agentToken)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // the listener and every connection, at once
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call succeeded after the endpoint stopped")
	}
	if err := waitRun(t, done); !errors.Is(err, bridge.ErrNotRunning) {
		t.Fatalf("the bridge ended with %v after the endpoint stopped\n%s", err, logs)
	}
}

// TestBridgeServeRestarts: an endpoint that comes back without the
// session (serve restarted) ends the bridge with ErrSessionGone, which
// tells the user to restart the client.
func TestBridgeServeRestarts(t *testing.T) {
	first, _ := testServer(t, false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	listening := make(chan struct{})
	var once sync.Once
	h := mcp.Handler(first, agentToken, adminToken)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			once.Do(func() { close(listening) })
		}
		h.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	transport, done, logs := bridged(t, "http://"+addr+"/mcp", agentToken)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	// The session is established on the first endpoint, standalone
	// stream included.
	select {
	case <-listening:
	case <-ctx.Done():
		t.Fatal("the bridge opened no standalone stream")
	}
	srv.Close()
	second, _ := testServer(t, false)
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the address was taken meanwhile: %v", err)
	}
	srv = &http.Server{Handler: mcp.Handler(second, agentToken, adminToken)}
	go srv.Serve(l)
	defer srv.Close()
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call succeeded in a session the restarted endpoint does not know")
	}
	if err := waitRun(t, done); !errors.Is(err, bridge.ErrSessionGone) || !strings.Contains(err.Error(), "restart the MCP client") {
		t.Fatalf("the bridge ended with %v\n%s", err, logs)
	}
}

// resultText is what a tool result says, for a failure message.
func resultText(res *sdk.CallToolResult) string {
	if res == nil {
		return "no result"
	}
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			out = append(out, t.Text)
		}
	}
	return strings.Join(out, "; ")
}
