package https

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Clients reach peers over pinned TLS (to check a sender's
	// preflight); their Directory authenticates requests. Required.
	Clients *peering.Clients
	// Inbox receives messages and keeps their replies. Required.
	Inbox delivery.InboxReceiver
	// Versions is this party's declaration (default delivery.LocalVersions).
	Versions *delivery.Versions
	// CheckTTL is how long a passed check of a sender's preflight is
	// reused (default 5 minutes).
	CheckTTL time.Duration
	// MaxBodyBytes limits a request body (default MaxBodyBytes).
	MaxBodyBytes int64
	// Logger receives refusal details, which never go on the wire.
	Logger *slog.Logger
}

// Server is the receiving side of the plain HTTPS binding.
type Server struct {
	cfg  ServerConfig
	side peering.CarrierSide
}

// NewServer returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Clients == nil || cfg.Inbox == nil {
		return nil, errors.New("https: ServerConfig needs Clients and Inbox")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = MaxBodyBytes
	}
	return &Server{cfg: cfg, side: peering.NewCarrierSide(cfg.Clients, cfg.Versions, cfg.CheckTTL, cfg.Logger)}, nil
}

// Handler returns the binding's three routes (CapabilitiesPath,
// ObjectsPath, RepliesPath...). Mount it on the peer listener's mux at
// "/a202/capabilities", "/a202/objects" and "/a202/replies/".
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(CapabilitiesPath, s.serveCapabilities)
	mux.HandleFunc(ObjectsPath, s.serveObjects)
	mux.HandleFunc(RepliesPath, s.serveReply)
	return mux
}

// Preflight is the capability preflight document.
type Preflight struct {
	URI          string   `json:"uri"`
	ReadVersions []string `json:"read_versions"`
	WriteVersion string   `json:"write_version"`
}

func (s *Server) serveCapabilities(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.writeError(w, errMethod{http.MethodGet})
		return
	}
	body, err := json.Marshal(Preflight{URI: delivery.ExtensionURI, ReadVersions: s.side.Local.Read, WriteVersion: s.side.Local.Write})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

// errMethod is a request with a method the route does not take.
type errMethod struct{ allow string }

func (e errMethod) Error() string { return "https: method not allowed; use " + e.allow }

// errNotFound is a reply that is not there.
var errNotFound = errors.New("https: no such reply")

// limitReader reads at most n bytes and remembers whether there was more,
// so an over-size body is recognised whichever reader noticed first.
type limitReader struct {
	r        io.Reader
	n        int64
	exceeded bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var one [1]byte
		if k, _ := l.r.Read(one[:]); k > 0 {
			l.exceeded = true
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}

var errTooLarge = errors.New("https: body too large")

func (s *Server) serveObjects(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.writeError(w, errMethod{http.MethodPost})
		return
	}
	peer, err := s.cfg.Clients.Directory().AuthenticateRequest(r)
	if err != nil {
		s.side.Log.Info("refused an HTTPS submission without a pinned client certificate", "remote_addr", r.RemoteAddr, "error", err)
		s.writeError(w, err)
		return
	}
	log := s.side.Log.With("from", peer.OrganizationID)
	if !activated(r.Header) {
		err := delivery.Unsupported("the submission does not name " + delivery.ExtensionURI + " in " + HeaderExtensions)
		log.Info("refused: not activated", "code", reason.ExtensionUnsupported, "detail", err)
		s.writeError(w, err)
		return
	}
	if err := s.side.CheckSender(r.Context(), peer.OrganizationID, peer.OrganizationID+"\x00"+peer.BaseURL(), func(ctx context.Context, hc *http.Client, p instance.PeerInfo) (string, error) {
		return "", checkPreflight(ctx, hc, p, s.side.Local)
	}); err != nil {
		log.Info("refused: the sender's preflight fails the capability check", "code", reason.ExtensionUnsupported, "detail", err)
		s.writeError(w, err)
		return
	}
	// Activated: from here on every answer echoes it.
	w.Header().Set(HeaderExtensions, delivery.ExtensionURI)
	lr := &limitReader{r: r.Body, n: s.cfg.MaxBodyBytes}
	objects, err := decodeObjects(r.Header.Get("Content-Type"), lr)
	if lr.exceeded {
		err = errTooLarge
	}
	if err != nil {
		log.Info("refused a submission body", "error", err)
		s.writeError(w, err)
		return
	}
	txn := r.Header.Get(HeaderTransaction)
	msg, err := delivery.Check(txn, objects)
	if err != nil {
		log.Info("refused A202 objects", "transaction_id", txn, "error", err)
		s.writeError(w, err)
		return
	}
	reply, err := s.cfg.Inbox.Receive(r.Context(), peer.OrganizationID, txn, msg)
	if err != nil {
		log.Info("the application did not accept the message", "transaction_id", txn, "error", err)
		s.writeError(w, err)
		return
	}
	log.Info("received A202 objects", "transaction_id", txn, "objects", len(objects), "reply_objects", len(reply))
	w.Header().Set("Location", RepliesPath+delivery.MessageKey(txn, objects))
	w.WriteHeader(http.StatusAccepted)
}

var keyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (s *Server) serveReply(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, errMethod{http.MethodGet})
		return
	}
	peer, err := s.cfg.Clients.Directory().AuthenticateRequest(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, RepliesPath)
	if !keyPattern.MatchString(key) {
		s.writeError(w, errNotFound)
		return
	}
	reply, err := s.cfg.Inbox.Reply(r.Context(), peer.OrganizationID, key)
	if errors.Is(err, store.ErrNotFound) {
		s.writeError(w, errNotFound)
		return
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	ct, body, err := encodeObjects(reply, true)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// errorBody is the body of a refusal.
type errorBody struct {
	ReasonCodes []string `json:"reason_codes"`
}

// writeError is the one place an error becomes a status of this binding.
// It writes codes, never a refusal's detail.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var refusal *reason.Refusal
	var framing *framingError
	var method errMethod
	var status int
	var codes []reason.Code
	withBody := true
	switch {
	case errors.As(err, &method):
		w.Header().Set("Allow", method.allow)
		status, withBody = http.StatusMethodNotAllowed, false
	case errors.Is(err, peering.ErrUnauthenticated):
		status, withBody = http.StatusForbidden, false
	case errors.Is(err, errNotFound):
		status, withBody = http.StatusNotFound, false
	case errors.Is(err, errTooLarge):
		status, withBody = http.StatusRequestEntityTooLarge, false
	case errors.Is(err, errMediaType):
		status, withBody = http.StatusUnsupportedMediaType, false
	case errors.Is(err, delivery.ErrConflict):
		status = http.StatusConflict
		if errors.As(err, &refusal) {
			codes = refusal.Codes
		}
	case errors.Is(err, delivery.ErrUnavailable) && errors.As(err, &refusal):
		// Held, not refused (an act waiting for this instance's
		// principal): the sender asks again, told why it waits.
		w.Header().Set("Retry-After", "5")
		status, codes = http.StatusServiceUnavailable, refusal.Codes
	case errors.As(err, &refusal) && refusal.Has(reason.ExtensionUnsupported):
		status, codes = http.StatusPreconditionFailed, []reason.Code{reason.ExtensionUnsupported}
		// Not activated: no echo on a 412.
		w.Header().Del(HeaderExtensions)
	case errors.As(err, &refusal):
		status, codes = http.StatusBadRequest, refusal.Codes
	case errors.As(err, &framing):
		status = http.StatusBadRequest
	default:
		s.side.Log.Error("HTTPS binding request failed", "error", err)
		status, withBody = http.StatusInternalServerError, false
	}
	if !withBody {
		http.Error(w, http.StatusText(status), status)
		return
	}
	body, _ := json.Marshal(errorBody{ReasonCodes: codeStrings(codes)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func codeStrings(codes []reason.Code) []string {
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = string(c)
	}
	return out
}

// preflightURL is peer's capability preflight.
func preflightURL(baseURL string) string {
	return strings.TrimSuffix(baseURL, "/") + CapabilitiesPath
}

// Mount registers the binding's routes on mux: CapabilitiesPath,
// ObjectsPath and the RepliesPath subtree.
func (s *Server) Mount(mux *http.ServeMux) {
	h := s.Handler()
	mux.Handle(CapabilitiesPath, h)
	mux.Handle(ObjectsPath, h)
	mux.Handle(RepliesPath, h)
}

// Routes returns the binding's patterns and handlers, for a daemon that
// mounts handlers one pattern at a time.
func (s *Server) Routes() map[string]http.Handler {
	h := s.Handler()
	return map[string]http.Handler{CapabilitiesPath: h, ObjectsPath: h, RepliesPath: h}
}
