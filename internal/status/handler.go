package status

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrUnknownMandate is returned by a Store for a mandate it does not hold.
var ErrUnknownMandate = errors.New("status: unknown mandate")

// Entry is what a Store knows of one mandate.
type Entry struct {
	// Status is Active, Suspended, Revoked or Expired.
	Status string
	// Record is the latest signed revocation_record about the mandate, or
	// nil when its status never changed.
	Record map[string]any
}

// Store holds the current status of the mandates an organisation issued.
type Store interface {
	// Status returns the current entry for mandateID, or an error wrapping
	// ErrUnknownMandate when the mandate is not one this store holds.
	Status(ctx context.Context, mandateID string) (Entry, error)
}

// EndpointFor returns the status_endpoint party writes into a mandate it
// issues: base (an https:// URL without a trailing slash) followed by
// /v1/mandates/<mandateID>/status, the path Handler reads.
func EndpointFor(base, mandateID string) string {
	return strings.TrimRight(base, "/") + "/v1/mandates/" + mandateID + "/status"
}

// Handler serves status documents from a Store (decisions.md 8). Mount it
// where EndpointFor's paths arrive; it takes the mandate identifier from the
// path segment before the final "status".
type Handler struct {
	store Store
	clock func() time.Time
	ttl   time.Duration
}

// NewHandler returns a Handler over store. clock gives the time written as
// as_of (nil means time.Now); ttl is how long each answer lives, at most
// MaxAge (0 means MaxAge).
func NewHandler(store Store, clock func() time.Time, ttl time.Duration) (*Handler, error) {
	if store == nil {
		return nil, errors.New("status: NewHandler needs a store")
	}
	if ttl == 0 {
		ttl = MaxAge
	}
	if ttl < time.Second || ttl > MaxAge {
		return nil, fmt.Errorf("status: ttl %s outside [1s, %s]", ttl, MaxAge)
	}
	if clock == nil {
		clock = time.Now
	}
	return &Handler{store: store, clock: clock, ttl: ttl.Truncate(time.Second)}, nil
}

// ServeHTTP answers GET and HEAD with the mandate's status document (200),
// 404 for a mandate the store does not hold, 421 for a request that did not
// arrive over TLS, 405 for other methods and 503 when the store fails. Only
// the 200 answer carries a document; everything else a relying party reads
// as unresolved.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		http.Error(w, "status is served over HTTPS only", http.StatusMisdirectedRequest)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	id, ok := mandateFromPath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	entry, err := h.store.Status(r.Context(), id)
	if errors.Is(err, ErrUnknownMandate) {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, "status unavailable", http.StatusServiceUnavailable)
		return
	}
	now := h.clock().UTC().Truncate(time.Second)
	doc := Document{
		MandateID:        id,
		Status:           entry.Status,
		AsOf:             now,
		ExpiresAt:        now.Add(h.ttl),
		RevocationRecord: entry.Record,
	}
	body, err := doc.Marshal()
	if err != nil {
		http.Error(w, "status unavailable", http.StatusServiceUnavailable)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	// Shared caches must not stretch the bound; the relying party's own
	// cache applies it.
	hdr.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(h.ttl/time.Second)))
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// mandateFromPath returns the mandate identifier in …/<id>/status.
func mandateFromPath(p string) (string, bool) {
	p = strings.TrimSuffix(p, "/")
	rest, ok := strings.CutSuffix(p, "/status")
	if !ok {
		return "", false
	}
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	return id, mandatePattern.MatchString(id)
}

// MemoryStore is an in-memory Store that enforces the status transitions of
// commercial mandate §9: a registered mandate starts active; active and
// suspended may each move to the other; either may move to revoked, which
// is final. Every change is made by applying a signed revocation_record,
// which then travels in the status document. It is safe for concurrent use.
type MemoryStore struct {
	mu      sync.RWMutex
	entries map[string]Entry
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entries: map[string]Entry{}}
}

// Register records a newly issued mandate as active. Registering a mandate
// twice is an error: it would reset a revocation.
func (s *MemoryStore) Register(mandateID string) error {
	if !mandatePattern.MatchString(mandateID) {
		return fmt.Errorf("status: %q is not a mandate identifier", mandateID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[mandateID]; ok {
		return fmt.Errorf("status: %s is already registered", mandateID)
	}
	s.entries[mandateID] = Entry{Status: Active}
	return nil
}

// Apply changes a registered mandate's status by a revocation_record about
// it (built by NewRevocationRecord, whose signature the caller has made or
// verified). A transition §9 does not allow is refused and changes nothing.
func (s *MemoryStore) Apply(record map[string]any) error {
	p, _ := record["payload"].(map[string]any)
	if t, _ := record["object_type"].(string); t != "revocation_record" || p == nil {
		return errors.New("status: not a revocation_record")
	}
	if st, _ := p["subject_type"].(string); st != "mandate" {
		return fmt.Errorf("status: revocation_record is about a %v, not a mandate", p["subject_type"])
	}
	id, _ := p["subject_id"].(string)
	to, _ := p["status"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.entries[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownMandate, id)
	}
	if !transitionAllowed(cur.Status, to) {
		return fmt.Errorf("status: %s cannot move from %s to %q", id, cur.Status, to)
	}
	s.entries[id] = Entry{Status: to, Record: record}
	return nil
}

func transitionAllowed(from, to string) bool {
	switch from {
	case Active:
		return to == Suspended || to == Revoked
	case Suspended:
		return to == Active || to == Revoked
	}
	return false
}

// Status implements Store.
func (s *MemoryStore) Status(_ context.Context, mandateID string) (Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.entries[mandateID]
	if !ok {
		return Entry{}, fmt.Errorf("%w: %s", ErrUnknownMandate, mandateID)
	}
	return e, nil
}
