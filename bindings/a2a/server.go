package a2a

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
)

// MaxBodyBytes is the default limit on a JSON-RPC request body.
const MaxBodyBytes = 4 << 20

// ServerConfig configures a Server.
type ServerConfig struct {
	// Card is the AgentCard to serve (see Card). Required.
	Card *a2a.AgentCard
	// Clients reach peers over pinned TLS; the server uses them to check
	// the sender's declaration, and its Directory to authenticate
	// requests. Required.
	Clients *peering.Clients
	// Receiver gets every message that passes the carrier checks;
	// normally the record engine. Required.
	Receiver delivery.Receiver
	// Versions is this party's declaration (default delivery.LocalVersions).
	Versions *delivery.Versions
	// CheckTTL is how long a passed check of a sender's card is reused
	// (default 5 minutes).
	CheckTTL time.Duration
	// MaxBodyBytes limits a request body (default MaxBodyBytes).
	MaxBodyBytes int64
	// Logger receives refusal details, which never go on the wire.
	Logger *slog.Logger
}

// Server is the receiving side of the binding.
type Server struct {
	cfg  ServerConfig
	side peering.CarrierSide
	card http.Handler
	rpc  http.Handler
}

// NewServer returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Card == nil || cfg.Clients == nil || cfg.Receiver == nil {
		return nil, errors.New("a2a: ServerConfig needs Card, Clients and Receiver")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = MaxBodyBytes
	}
	s := &Server{cfg: cfg, side: peering.NewCarrierSide(cfg.Clients, cfg.Versions, cfg.CheckTTL, cfg.Logger)}
	s.card = a2asrv.NewStaticAgentCardHandler(cfg.Card)
	s.rpc = a2asrv.NewJSONRPCHandler(&requestHandler{s: s})
	return s, nil
}

// Handler returns the binding's routes: GET CardPath (public) and POST
// EndpointPath (pinned peers only). Mount it on the peer listener's mux
// at both paths, or use CardHandler and EndpointHandler separately.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(CardPath, s.CardHandler())
	mux.Handle(EndpointPath, s.EndpointHandler())
	return mux
}

// CardHandler serves the AgentCard.
func (s *Server) CardHandler() http.Handler { return s.card }

// EndpointHandler serves the JSON-RPC endpoint: authentication, the body
// limit, activation and the check of the sender's declaration run here,
// before the a2a-go JSON-RPC handler sees the request.
func (s *Server) EndpointHandler() http.Handler {
	return http.HandlerFunc(s.serveEndpoint)
}

// rpcEnvelope is what the middleware reads of a JSON-RPC request.
type rpcEnvelope struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
}

// errParse marks a body that is not a JSON-RPC request at all.
var errParse = errors.New("a2a: request is not JSON-RPC")

func (s *Server) serveEndpoint(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.writeError(w, nil, errMethod)
		return
	}
	peer, err := s.cfg.Clients.Directory().AuthenticateRequest(r)
	if err != nil {
		s.side.Log.Info("refused an A2A request without a pinned client certificate", "remote_addr", r.RemoteAddr, "error", err)
		s.writeError(w, nil, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		s.side.Log.Info("refused an A2A request body", "from", peer.OrganizationID, "error", err)
		s.writeError(w, nil, err)
		return
	}
	var env rpcEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		s.writeError(w, nil, fmt.Errorf("%w: %v", errParse, err))
		return
	}
	log := s.side.Log.With("from", peer.OrganizationID, "method", env.Method)
	if !requested(r.Header) {
		log.Info("refused: the request does not activate the A202 extension", "code", reason.ExtensionUnsupported)
		s.writeError(w, env.ID, delivery.Unsupported("the request does not activate "+delivery.ExtensionURI))
		return
	}
	if env.Method == "message/stream" || env.Method == "tasks/resubscribe" {
		// Streaming is not offered (the card says so); refusing here keeps
		// the SDK from opening an event stream for an error.
		s.writeError(w, env.ID, a2a.ErrUnsupportedOperation)
		return
	}
	ctx := r.Context()
	if err := s.side.CheckSender(ctx, peer.OrganizationID, peer.OrganizationID+"\x00"+peer.AgentCardURL, func(ctx context.Context, hc *http.Client, p instance.PeerInfo) (string, error) {
		return checkCard(ctx, hc, p, s.side.Local)
	}); err != nil {
		log.Info("refused: the sender's declaration fails the capability check", "code", reason.ExtensionUnsupported, "detail", err)
		s.writeError(w, env.ID, err)
		return
	}
	// Activated: echo it under both names (binding §2.3).
	w.Header().Set(HeaderExtensions, delivery.ExtensionURI)
	w.Header().Set(HeaderXExtensions, delivery.ExtensionURI)
	w.Header().Set("Content-Type", "application/json")
	if env.Method == "message/send" {
		// The one shape party writes, read in one pass (fast.go); any
		// other goes to a2a-go below.
		if req, txn, objects, err := fastSend(body); !errors.Is(err, errNotFast) {
			s.serveSend(w, r.WithContext(peering.WithPeer(ctx, peer.OrganizationID)), peer.OrganizationID, req, txn, objects, err)
			return
		}
	}
	out := &outcome{}
	ctx = context.WithValue(peering.WithPeer(ctx, peer.OrganizationID), outcomeKey{}, out)
	r2 := r.WithContext(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	sw := &substitute{ResponseWriter: w, out: out, id: env.ID, s: s}
	s.rpc.ServeHTTP(sw, r2)
	if out.err != nil && !sw.done {
		sw.done = true
		s.writeError(w, env.ID, out.err)
	}
}

// outcome carries the error a request handler method returned to the
// middleware, so that writeError, not the SDK, shapes it on the wire.
type outcome struct{ err error }

type outcomeKey struct{}

// fail records err for the middleware and returns it for the SDK.
func fail(ctx context.Context, err error) error {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		o.err = err
	}
	return err
}

// substitute passes the SDK's response through, unless the handler
// failed: then the SDK's error response is dropped and writeError's is
// written in its place.
type substitute struct {
	http.ResponseWriter
	out  *outcome
	id   json.RawMessage
	s    *Server
	done bool
}

func (w *substitute) WriteHeader(code int) {
	if w.out.err != nil {
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *substitute) Write(b []byte) (int, error) {
	if w.out.err != nil {
		if !w.done {
			w.done = true
			w.s.writeError(w.ResponseWriter, w.id, w.out.err)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// rpcError is a JSON-RPC 2.0 error object.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *rpcError       `json:"error"`
}

// errMethod is a request that is not a POST.
var errMethod = errors.New("a2a: the JSON-RPC endpoint takes POST only")

// kernelRefusal is the error text of a refusal without a code.
const kernelRefusal = "A202 kernel validation refusal"

// a2aErrors are the A2A protocol errors the request handler returns, with
// their JSON-RPC codes (A2A specification §8).
var a2aErrors = []struct {
	err  error
	code int
}{
	{a2a.ErrParseError, -32700},
	{a2a.ErrInvalidRequest, -32600},
	{a2a.ErrMethodNotFound, -32601},
	{a2a.ErrInvalidParams, -32602},
	{a2a.ErrTaskNotFound, -32001},
	{a2a.ErrPushNotificationNotSupported, -32003},
	{a2a.ErrUnsupportedOperation, -32004},
	{a2a.ErrAuthenticatedExtendedCardNotConfigured, -32007},
}

// writeError is the one place an error becomes a response of this
// binding. It never writes a refusal's detail, only its codes.
func (s *Server) writeError(w http.ResponseWriter, id json.RawMessage, err error) {
	status := http.StatusOK
	var e rpcError
	var refusal *reason.Refusal
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errMethod):
		status = http.StatusMethodNotAllowed
		e = rpcError{Code: -32600, Message: "invalid request", Data: map[string]any{"error": "POST only"}}
	case errors.Is(err, peering.ErrUnauthenticated):
		status = http.StatusForbidden
		e = rpcError{Code: -32600, Message: "invalid request", Data: map[string]any{"error": "a client certificate pinned by this instance is required"}}
	case errors.As(err, &tooBig):
		status = http.StatusRequestEntityTooLarge
		e = rpcError{Code: -32600, Message: "invalid request", Data: map[string]any{"error": fmt.Sprintf("request body over %d bytes", tooBig.Limit)}}
	case errors.Is(err, errParse):
		e = rpcError{Code: -32700, Message: "parse error"}
	case errors.Is(err, delivery.ErrConflict):
		e = rpcError{Code: -32000, Message: "server error", Data: map[string]any{"error": "conflict", "a202_conflict": true}}
		if errors.As(err, &refusal) {
			e.Data["a202_reason_codes"] = codeStrings(refusal.Codes)
		}
	case errors.Is(err, delivery.ErrUnavailable) && errors.As(err, &refusal):
		// Not refused: held (an act waiting for this instance's principal).
		// The sender asks again, and is told why it waits.
		e = rpcError{Code: -32000, Message: "server error", Data: map[string]any{"error": "try again later", "a202_retry": true, "a202_reason_codes": codeStrings(refusal.Codes)}}
	case errors.As(err, &refusal):
		text := kernelRefusal
		if len(refusal.Codes) > 0 {
			text = strings.Join(codeStrings(refusal.Codes), ", ")
		}
		e = rpcError{Code: -32602, Message: "invalid params", Data: map[string]any{"error": text, "a202_reason_codes": codeStrings(refusal.Codes)}}
	default:
		e = rpcError{Code: -32603, Message: "internal error", Data: map[string]any{"error": "internal error; try again later"}}
		for _, a := range a2aErrors {
			if errors.Is(err, a.err) {
				e = rpcError{Code: a.code, Message: a.err.Error()}
				break
			}
		}
		if e.Code == -32603 {
			s.side.Log.Error("A2A request failed", "error", err)
		}
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if werr := json.NewEncoder(w).Encode(rpcResponse{JSONRPC: "2.0", ID: id, Error: &e}); werr != nil {
		s.side.Log.Debug("writing an A2A error response failed", "error", werr)
	}
}

func codeStrings(codes []reason.Code) []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = string(c)
	}
	return out
}

// requestHandler is the a2asrv.RequestHandler: message/send only, no
// tasks. Every error goes through fail, so writeError shapes it.
type requestHandler struct{ s *Server }

var _ a2asrv.RequestHandler = (*requestHandler)(nil)

// OnSendMessage decodes the objects and the correlation id, applies the
// carrier checks and hands the message to the Receiver. The result is a
// Message, never a Task: the exchange creates no carrier state.
func (h *requestHandler) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	from, ok := peering.PeerFrom(ctx)
	if !ok {
		return nil, fail(ctx, peering.ErrUnauthenticated)
	}
	if params == nil || params.Message == nil {
		return nil, fail(ctx, fmt.Errorf("%w: no message", a2a.ErrInvalidParams))
	}
	txn, objects, err := readMessage(params.Message)
	var reply [][]byte
	if err == nil {
		reply, err = h.s.take(ctx, from, params.Message.ID, txn, objects)
	}
	if err != nil {
		return nil, fail(ctx, err)
	}
	return newMessage(a2a.MessageRoleAgent, txn, reply), nil
}

// take applies the carrier checks to a message's objects and hands them
// to the Receiver: what every message/send comes to, read by a2a-go or in
// one pass (serveSend).
func (s *Server) take(ctx context.Context, from, messageID, txn string, objects [][]byte) ([][]byte, error) {
	log := s.side.Log.With("from", from, "message_id", messageID)
	msg, err := delivery.Check(txn, objects)
	if err == nil {
		var reply [][]byte
		reply, err = s.cfg.Receiver.Receive(ctx, from, txn, msg)
		if err == nil {
			log.Info("received A202 objects", "transaction_id", txn, "objects", len(objects), "reply_objects", len(reply))
			return reply, nil
		}
	}
	var refusal *reason.Refusal
	switch {
	case errors.Is(err, delivery.ErrConflict):
		log.Info("the application reports a chain conflict", "transaction_id", txn, "detail", err)
	case errors.As(err, &refusal):
		log.Info("refused A202 objects", "transaction_id", txn, "codes", refusal.Codes, "detail", refusal.Detail)
	}
	return nil, err
}

// serveSend answers a message/send read in one pass (fastSend): the same
// checks and Receiver as OnSendMessage, the response written as a2a-go
// writes it, an error by writeError.
func (s *Server) serveSend(w http.ResponseWriter, r *http.Request, from string, req wireRequest, txn string, objects [][]byte, readErr error) {
	if readErr != nil {
		s.writeError(w, req.ID, readErr)
		return
	}
	reply, err := s.take(r.Context(), from, req.Params.Message.MessageID, txn, objects)
	if err != nil {
		s.writeError(w, req.ID, err)
		return
	}
	if _, err := w.Write(encodeResult(req.ID, txn, reply)); err != nil {
		s.side.Log.Debug("writing an A2A response failed", "error", err)
	}
}

// readMessage extracts the correlation id and the objects' bytes.
func readMessage(m *a2a.Message) (string, [][]byte, error) {
	txn, err := correlation(m.Metadata)
	if err != nil {
		return "", nil, err
	}
	var objects [][]byte
	for i, p := range m.Parts {
		var fp a2a.FilePart
		switch v := p.(type) {
		case a2a.FilePart:
			fp = v
		case *a2a.FilePart:
			fp = *v
		case a2a.TextPart, *a2a.TextPart, a2a.DataPart, *a2a.DataPart:
			// Not an object; a data part may be a convenience view, which
			// is never hashed or verified (binding §5.2).
			continue
		default:
			return "", nil, fmt.Errorf("%w: part %d is of an unknown kind", a2a.ErrInvalidParams, i)
		}
		fb, ok := fp.File.(a2a.FileBytes)
		if !ok {
			return "", nil, reason.Refuse(fmt.Sprintf("part %d is not a file part with bytes; an object travels as its canonical bytes", i))
		}
		b, err := fileBytes(i, fb.MimeType, fb.Bytes)
		if err != nil {
			return "", nil, err
		}
		objects = append(objects, b)
	}
	return txn, objects, nil
}

// fileBytes is the object the i-th part carries: bytes of the A202 media
// type, in base64.
func fileBytes(i int, mimeType, b64 string) ([]byte, error) {
	if mimeType != delivery.MediaType {
		return nil, reason.Refuse(fmt.Sprintf("part %d has media type %q, not %s", i, mimeType, delivery.MediaType))
	}
	b, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, reason.Refuse(fmt.Sprintf("part %d: bytes are not base64: %v", i, err))
	}
	return b, nil
}

// correlation reads metadata[ExtensionURI].transaction_id: a string, or
// null or absent for a message of no transaction.
func correlation(meta map[string]any) (string, error) {
	v, ok := meta[delivery.ExtensionURI]
	if !ok || v == nil {
		return "", nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", fmt.Errorf("%w: metadata[%s] is not an object", a2a.ErrInvalidParams, delivery.ExtensionURI)
	}
	switch t := m["transaction_id"].(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	default:
		return "", fmt.Errorf("%w: metadata[%s].transaction_id is not a string", a2a.ErrInvalidParams, delivery.ExtensionURI)
	}
}

// newMessage builds a message carrying objects as file parts, correlated
// to txn.
func newMessage(role a2a.MessageRole, txn string, objects [][]byte) *a2a.Message {
	parts := make([]a2a.Part, len(objects))
	for i, o := range objects {
		parts[i] = a2a.FilePart{File: a2a.FileBytes{
			FileMeta: a2a.FileMeta{MimeType: delivery.MediaType},
			Bytes:    base64.StdEncoding.EncodeToString(o),
		}}
	}
	m := a2a.NewMessage(role, parts...)
	var t any
	if txn != "" {
		t = txn
	}
	m.Extensions = []string{delivery.ExtensionURI}
	m.Metadata = map[string]any{delivery.ExtensionURI: map[string]any{"transaction_id": t}}
	return m
}

// OnGetTask answers "task not found": this binding creates no tasks.
func (h *requestHandler) OnGetTask(ctx context.Context, _ *a2a.TaskQueryParams) (*a2a.Task, error) {
	return nil, fail(ctx, a2a.ErrTaskNotFound)
}

// OnCancelTask answers "task not found".
func (h *requestHandler) OnCancelTask(ctx context.Context, _ *a2a.TaskIDParams) (*a2a.Task, error) {
	return nil, fail(ctx, a2a.ErrTaskNotFound)
}

// OnResubscribeToTask answers "task not found".
func (h *requestHandler) OnResubscribeToTask(ctx context.Context, _ *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, fail(ctx, a2a.ErrTaskNotFound)) }
}

// OnSendMessageStream is not supported: the card declares no streaming.
func (h *requestHandler) OnSendMessageStream(ctx context.Context, _ *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, fail(ctx, a2a.ErrUnsupportedOperation)) }
}

// OnGetTaskPushConfig is not supported.
func (h *requestHandler) OnGetTaskPushConfig(ctx context.Context, _ *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, fail(ctx, a2a.ErrPushNotificationNotSupported)
}

// OnListTaskPushConfig is not supported.
func (h *requestHandler) OnListTaskPushConfig(ctx context.Context, _ *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, fail(ctx, a2a.ErrPushNotificationNotSupported)
}

// OnSetTaskPushConfig is not supported.
func (h *requestHandler) OnSetTaskPushConfig(ctx context.Context, _ *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, fail(ctx, a2a.ErrPushNotificationNotSupported)
}

// OnDeleteTaskPushConfig is not supported.
func (h *requestHandler) OnDeleteTaskPushConfig(ctx context.Context, _ *a2a.DeleteTaskPushConfigParams) error {
	return fail(ctx, a2a.ErrPushNotificationNotSupported)
}

// OnGetExtendedAgentCard is not configured: the public card says it all.
func (h *requestHandler) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	return nil, fail(ctx, a2a.ErrAuthenticatedExtendedCardNotConfigured)
}

// Mount registers the binding's routes on mux: CardPath and EndpointPath.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle(CardPath, s.CardHandler())
	mux.Handle(EndpointPath, s.EndpointHandler())
}

// Routes returns the binding's patterns and handlers, for a daemon that
// mounts handlers one pattern at a time.
func (s *Server) Routes() map[string]http.Handler {
	return map[string]http.Handler{CardPath: s.CardHandler(), EndpointPath: s.EndpointHandler()}
}
