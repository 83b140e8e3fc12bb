// Package principal is the principal's surface of a party instance: the
// acts only a person with the organisation's principal key may take.
//
//   - IssueMandate: sign a mandate for an agent (commercial mandate §3),
//     refused before signing whenever the gate would refuse it.
//   - Suspend, Reinstate, Revoke: change a mandate's status, each change
//     announced by a signed revocation_record and visible at the mandate's
//     status endpoint at once (§9). Revocation is final.
//   - Approvals and Decide: list the acts agents asked to have approved,
//     showing the exact act document, and approve or reject one; the
//     approval is signed with the principal's own key and bound to the one
//     action hash (§8).
//
// The agent's MCP surface never reaches this package: the CLI (with the
// state directory's files) and the admin listener (with the admin token)
// do. That separation is decisions.md 9: an agent can ask for approval but
// can never approve.
//
// # Roles in the types
//
// That separation is a fact of the types, not a convention. The
// organisation's runtime (*org.Org, over *instance.Instance) holds the
// agent's private key and the principal's public key, never the
// principal's private key: instance.Open does not read keys/principal.pem.
// This package is the only reader of that file ([LoadKey]), and what it reads
// it keeps in a Key, whose fields are unexported and which has no method
// that signs or hands the private key out. A Surface is built from the two
// separately, the way golang.org/x/mod's sumdb server is built from a narrow
// ServerOps rather than from the whole of its storage:
//
//	o, _ := org.Open(dir, org.Options{})   // the agent runtime: no principal key
//	k, _ := principal.LoadKey(dir)         // the principal's key, apart
//	p, _ := principal.New(o, k)            // the one value that signs as the principal
//
// (Open does the last two steps.) Only the Surface's own acts sign with the
// key: IssueMandate, Suspend, Reinstate, Revoke and Decide. New fails
// closed when the key is not the one the instance's configuration names
// and its key record states.
//
// What keeps the agent from it: the packages of the agent's side (org,
// instance, agent, record, delivery, peering, status, store, bindings/mcp
// and its bridge, bindings/a2a, bindings/https) import neither this
// package nor the admin listener, and none of them names the principal
// key file; the agent runtime's types (Org, Instance, agent.Surface,
// record.Engine, daemon.Daemon) have no field through which a Key or a
// Surface can be reached; and in a running `party serve`, which does load
// the key for its admin listener, no private key reachable from the
// values handed to the agent's tools and the record engine is the
// principal's. roles_test.go and internal/daemon's tests check all three.
// What the types cannot stop is code that reads the file itself: whoever
// can read keys/ is that organisation (README, "Security model").
package principal

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/org"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/status"
	"github.com/partyd/party/internal/store"
)

// Key is an organisation's principal key, as LoadKey reads it from the
// state directory. It signs nothing by itself: only a Surface built with
// New signs with it, and only its own acts. Its printed and logged forms
// name the key id alone.
type Key struct {
	id     string
	public crypto.PublicKey
	signer signature.Signer
}

// LoadKey reads the principal's key from the state directory dir
// (instance.PrincipalKeyFile, which must be mode 0600), under the key id
// config.json names.
func LoadKey(dir string) (*Key, error) {
	cfg, err := instance.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	k, err := keys.ReadPrivateFile(instance.Paths{Dir: dir}.Join(keyFileOf(cfg)))
	if err != nil {
		return nil, fmt.Errorf("principal: %w", err)
	}
	signer, err := signature.NewSigner(cfg.PrincipalKeyID, k)
	if err != nil {
		return nil, fmt.Errorf("principal: %w", err)
	}
	return &Key{id: cfg.PrincipalKeyID, public: k.Public(), signer: signer}, nil
}

// keyFileOf is the state-directory file holding the principal key the
// configuration names: instance.PrincipalKeyFile until the key is first
// rotated (RotatePrincipalKey), then keys/principal-<key id>.pem.
func keyFileOf(cfg instance.Config) string {
	if cfg.PrincipalKeyFile == "" {
		return instance.PrincipalKeyFile
	}
	return cfg.PrincipalKeyFile
}

// KeyID is the key's key_id.
func (k *Key) KeyID() string { return k.id }

// Public is the key's public half.
func (k *Key) Public() crypto.PublicKey { return k.public }

// String names the key by its id only.
func (k *Key) String() string { return "principal key " + k.id }

// GoString, like String, names the key by its id only, so that %#v never
// walks into the private key.
func (k *Key) GoString() string { return k.String() }

// LogValue logs the key as its id.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// Surface is the principal's surface over one organisation: the agent
// runtime o, to read the record and resolve keys and mandates, and the
// principal's key, to sign.
type Surface struct {
	o *org.Org

	mu  sync.Mutex
	key *Key // see signer
}

// statusRecord is a status (revocation) record for spec, signed with the
// principal's current key, and the canonical bytes it is stored as.
func (s *Surface) statusRecord(spec status.RevocationSpec) (map[string]any, []byte, error) {
	rec, err := status.NewRevocationRecord(spec, s.signer())
	if err != nil {
		return nil, nil, err
	}
	b, err := canonical.Marshal(rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, b, nil
}

// signer is the principal's signer under the key config.json names now:
// a principal key rotation made by another process (the CLI, while
// `party serve` keeps this surface for its approvals page) is picked up
// at the next act. A key file that fails to load or match keeps the old
// signer, whose acts are then refused as the old key's; it is logged.
func (s *Surface) signer() signature.Signer {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := s.o.Config()
	if cfg.PrincipalKeyID == s.key.id {
		return s.key.signer
	}
	k, err := LoadKey(s.o.In.Dir)
	if err == nil && k.id == cfg.PrincipalKeyID {
		var own crypto.PublicKey
		if own, err = s.o.PublicKey(context.Background(), k.id); err == nil && samePublic(own, k.public) {
			s.key = k
			s.o.Log.Info("the principal key changed; signing with the new one", "key_id", k.id)
			return s.key.signer
		}
	}
	s.o.Log.Error("the configuration names another principal key, which does not load; signing with the old one", "key_id", cfg.PrincipalKeyID, "error", err)
	return s.key.signer
}

// ErrWrongKey is returned by New for a key that is not this
// organisation's principal key.
var ErrWrongKey = errors.New("principal: the key is not this organisation's principal key")

// New returns the principal's surface of o, signing with key. The key
// must be the one o's configuration names and its key record in the
// record states; any other is refused, so that nothing is signed under a
// key id that belongs to a different key.
func New(o *org.Org, key *Key) (*Surface, error) {
	if o == nil || key == nil {
		return nil, errors.New("principal: New needs the organisation and its principal key")
	}
	cfg := o.Config()
	if key.id != cfg.PrincipalKeyID {
		return nil, fmt.Errorf("%w: it is %s, the configuration names %s", ErrWrongKey, key.id, cfg.PrincipalKeyID)
	}
	own, err := o.PublicKey(context.Background(), cfg.PrincipalKeyID)
	if err != nil {
		return nil, err
	}
	if !samePublic(own, key.public) {
		return nil, fmt.Errorf("%w: %s in %s does not match the key record %s", ErrWrongKey, keyFileOf(cfg), o.In.Dir, cfg.PrincipalKeyID)
	}
	return &Surface{o: o, key: key}, nil
}

// Open loads the principal key from o's own state directory and returns
// the principal's surface of o.
func Open(o *org.Org) (*Surface, error) {
	key, err := LoadKey(o.In.Dir)
	if err != nil {
		return nil, err
	}
	return New(o, key)
}

func samePublic(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

// Config is the instance configuration.
func (s *Surface) Config() instance.Config { return s.o.Config() }

// IssueMandate completes req with this instance's defaults and issues it:
// the issuer is this organisation's principal and key; the represented
// organisation is this organisation; the status endpoint, when not given,
// is this instance's own; the subject, when it names no one, is this
// instance's agent and agent key. A request naming another organisation's
// principal as issuer is refused: this instance holds only its own key.
// The signed mandate is stored and returned.
func (s *Surface) IssueMandate(ctx context.Context, req authority.IssueRequest) (map[string]any, error) {
	cfg := s.o.Config()
	if req.Issuer == (authority.Issuer{}) {
		req.Issuer = authority.Issuer{OrganizationID: cfg.OrganizationID, PrincipalID: cfg.PrincipalID, KeyID: cfg.PrincipalKeyID}
	}
	if req.Issuer.OrganizationID != cfg.OrganizationID || req.Issuer.KeyID != cfg.PrincipalKeyID {
		return nil, fmt.Errorf("principal: this instance signs only as %s with key %s, not as %s with %s",
			cfg.OrganizationID, cfg.PrincipalKeyID, req.Issuer.OrganizationID, req.Issuer.KeyID)
	}
	if req.RepresentedOrganizationID == "" {
		req.RepresentedOrganizationID = cfg.OrganizationID
	}
	if req.Subject == (authority.Subject{}) {
		req.Subject = authority.Subject{AgentID: cfg.AgentID, KeyID: cfg.AgentKeyID}
	}
	if req.Subject.AgentID != "" && req.Subject.KeyID == "" {
		// One of this instance's agents, under its current key.
		kid, ok := cfg.KeyOf(req.Subject.AgentID)
		if !ok {
			return nil, fmt.Errorf("principal: %s is not an active agent of this instance; name its key_id, or add it with `party agent add`", req.Subject.AgentID)
		}
		req.Subject.KeyID = kid
	}
	if err := knownActs(req.Actions); err != nil {
		return nil, err
	}
	if req.MandateID == "" {
		id, err := envelope.NewID("mnd")
		if err != nil {
			return nil, err
		}
		req.MandateID = id
	}
	if req.StatusEndpoint == "" {
		req.StatusEndpoint = status.EndpointFor(cfg.PublicURL, req.MandateID)
	}
	now := s.o.Clock()
	var m map[string]any
	if req.ParentMandateID != nil {
		parent, err := s.o.ResolveMandate(ctx, *req.ParentMandateID)
		if err != nil {
			return nil, reason.Refusef(reason.MandateDelegationWidening, "parent mandate %s: %v", *req.ParentMandateID, err)
		}
		if m, err = authority.IssueDelegated(req, parent, s.signer(), now); err != nil {
			return nil, err
		}
	} else {
		var err error
		if m, err = authority.Issue(req, s.signer(), now); err != nil {
			return nil, err
		}
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := s.o.Store.PutMandate(ctx, b, "local"); err != nil {
		return nil, err
	}
	s.o.Log.Info("mandate issued", "mandate_id", req.MandateID, "subject", req.Subject.AgentID+req.Subject.PrincipalID)
	return m, nil
}

// Suspend suspends an active mandate; Reinstate reverses a suspension.
func (s *Surface) Suspend(ctx context.Context, mandateID, why string) error {
	return s.change(ctx, mandateID, store.StatusActive, store.StatusSuspended, why)
}

// Reinstate makes a suspended mandate active again.
func (s *Surface) Reinstate(ctx context.Context, mandateID, why string) error {
	return s.change(ctx, mandateID, store.StatusSuspended, store.StatusActive, why)
}

// Revoke revokes a mandate for good, whether active or suspended.
func (s *Surface) Revoke(ctx context.Context, mandateID, why string) error {
	rec, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return err
	}
	return s.change(ctx, mandateID, rec.Status, store.StatusRevoked, why)
}

// Why a status change does not apply. Each is wrapped with the mandate's
// id; test with errors.Is.
var (
	// ErrNotLocal: the mandate was issued by another organisation, so
	// this principal cannot change its status.
	ErrNotLocal = errors.New("principal: the mandate was issued by another organisation")
	// ErrWrongStatus: the mandate is not in the status the change
	// applies to (suspending a suspended mandate, reinstating an active
	// one).
	ErrWrongStatus = errors.New("principal: the mandate is not in the status the change applies to")
	// ErrFinal: the mandate is revoked, and revocation is final.
	ErrFinal = errors.New("principal: the mandate is revoked; revocation is final")
)

func (s *Surface) change(ctx context.Context, mandateID, from, to, why string) error {
	rec, err := s.o.Store.GetMandate(ctx, mandateID)
	if err != nil {
		return err
	}
	if rec.Origin != "local" {
		return fmt.Errorf("%w: %s", ErrNotLocal, mandateID)
	}
	// Revoked is checked before the expected status, so any change to a
	// revoked mandate says revocation is final, not merely that the
	// mandate is not active or suspended.
	if from == store.StatusRevoked {
		return fmt.Errorf("%w: %s", ErrFinal, mandateID)
	}
	if rec.Status == store.StatusRevoked {
		return fmt.Errorf("%w: %s is revoked, not %s", ErrFinal, mandateID, from)
	}
	if rec.Status != from {
		return fmt.Errorf("%w: %s is %s, not %s", ErrWrongStatus, mandateID, rec.Status, from)
	}
	doc, err := canonical.DecodeObject(rec.Body)
	if err != nil {
		return err
	}
	subj, _ := doc["subject"].(map[string]any)
	agent, _ := subj["agent_id"].(string)
	if agent == "" {
		agent = s.o.Config().AgentID
	}
	if why == "" {
		why = "status changed by the issuing principal"
	}
	now := s.o.Clock()
	_, b, err := s.statusRecord(status.RevocationSpec{
		SubjectType: "mandate", SubjectID: mandateID, Status: to, EffectiveAt: now, Reason: why,
		CreatedBy: envelope.Actor{OrganizationID: s.o.Config().OrganizationID, AgentID: agent, MandateID: mandateID},
		CreatedAt: now,
	})
	if err != nil {
		return err
	}
	if err := s.o.Store.ChangeMandateStatus(ctx, mandateID, from, to, b); err != nil {
		return err
	}
	s.o.Log.Info("mandate status changed", "mandate_id", mandateID, "from", from, "to", to)
	return nil
}

// Approval is an approval request as the principal sees it: the exact act
// document the agent wants to take, and what became of the request.
type Approval struct {
	RequestID     string                  `json:"approval_request_id"`
	MandateID     string                  `json:"mandate_id"`
	TransactionID string                  `json:"transaction_id,omitempty"`
	ActionHash    string                  `json:"action_hash"`
	Act           map[string]any          `json:"act"`
	Rules         []authority.MatchedRule `json:"approval_rules_matched"`
	Status        string                  `json:"status"`
	ApprovalID    string                  `json:"approval_id,omitempty"`
	RequestedAt   string                  `json:"requested_at"`
	DecidedAt     string                  `json:"decided_at,omitempty"`
	// HeldBy says which of the organisation's budgets holds the act, when
	// one does (its approval threshold), beside or instead of the rules.
	HeldBy string `json:"held_by_budget,omitempty"`
}

func view(r store.ApprovalRequest) (Approval, error) {
	act, err := canonical.DecodeObject(r.Act)
	if err != nil {
		return Approval{}, err
	}
	var rules []authority.MatchedRule
	if err := json.Unmarshal([]byte(r.Rules), &rules); err != nil {
		return Approval{}, err
	}
	return Approval{
		RequestID: r.ID, MandateID: r.MandateID, TransactionID: r.TransactionID, ActionHash: r.ActionHash,
		Act: act, Rules: rules, Status: r.Status, ApprovalID: r.ApprovalID, RequestedAt: r.RequestedAt, DecidedAt: r.DecidedAt,
		HeldBy: r.Note,
	}, nil
}

// Approvals lists approval requests; pendingOnly leaves out decided ones.
func (s *Surface) Approvals(ctx context.Context, pendingOnly bool) ([]Approval, error) {
	st := ""
	if pendingOnly {
		st = store.ApprovalPending
	}
	return views(s.o.Store.ApprovalRequests(ctx, st))
}

// DecidedShown is how many decided requests the approvals page shows
// beside the pending ones: the latest.
const DecidedShown = 50

// ApprovalsShown lists what the approvals page shows: every pending
// request, then the DecidedShown latest decided ones, newest first
// (store.ApprovalRequestsShown). `party approvals --all` lists them all.
func (s *Surface) ApprovalsShown(ctx context.Context) ([]Approval, error) {
	return views(s.o.Store.ApprovalRequestsShown(ctx, DecidedShown))
}

// ApprovalsOf lists one transaction's requests, oldest first.
func (s *Surface) ApprovalsOf(ctx context.Context, txn string) ([]Approval, error) {
	return views(s.o.Store.ApprovalRequestsOfTransaction(ctx, txn))
}

func views(rs []store.ApprovalRequest, err error) ([]Approval, error) {
	if err != nil {
		return nil, err
	}
	out := []Approval{}
	for _, r := range rs {
		v, err := view(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ErrDecided is returned when a request was already approved or rejected.
var ErrDecided = errors.New("principal: approval request already decided")

// Decide approves (approve=true) or rejects one pending request. The
// approval object is signed with the principal's key, bound to the
// request's action hash and transaction, and good for the shortest life
// the matched rules allow. It returns the stored approval object.
func (s *Surface) Decide(ctx context.Context, requestID string, approve bool, conditions []string) (map[string]any, error) {
	var obj map[string]any
	var r store.ApprovalRequest
	decision := authority.Approved
	if !approve {
		decision = authority.Rejected
	}
	// Read, signed and stored in one write transaction (store.DecideApproval).
	err := s.o.Store.DecideApproval(ctx, requestID, func(req store.ApprovalRequest) (string, []byte, error) {
		r = req
		v, err := view(r)
		if err != nil {
			return "", nil, err
		}
		m, err := s.o.Store.GetMandate(ctx, r.MandateID)
		if err != nil {
			return "", nil, err
		}
		doc, err := canonical.DecodeObject(m.Body)
		if err != nil {
			return "", nil, err
		}
		subj, _ := doc["subject"].(map[string]any)
		agent, _ := subj["agent_id"].(string)
		cfg := s.o.Config()
		obj, err = authority.NewApproval(ctx, authority.ApprovalRequest{
			ActionHash:    r.ActionHash,
			TransactionID: r.TransactionID,
			RequestedBy:   envelope.Actor{OrganizationID: cfg.OrganizationID, AgentID: agent, MandateID: r.MandateID},
			Approver:      authority.Approver{OrganizationID: cfg.OrganizationID, PrincipalID: cfg.PrincipalID, Role: cfg.PrincipalRole},
			Decision:      decision,
			Rules:         v.Rules,
			Conditions:    conditions,
		}, s.signer(), s.o, s.o.Clock())
		if err != nil {
			return "", nil, err
		}
		b, err := canonical.Marshal(obj)
		if err != nil {
			return "", nil, err
		}
		if !approve {
			return store.ApprovalRejected, b, nil
		}
		return store.ApprovalApproved, b, nil
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: %v", ErrDecided, err)
		}
		return nil, err
	}
	s.o.Log.Info("approval decided", "approval_request_id", requestID, "decision", decision, "action_hash", r.ActionHash)
	return obj, nil
}

// MandateSummary is one mandate as the principal lists it.
type MandateSummary struct {
	ID        string   `json:"mandate_id"`
	Subject   string   `json:"subject"`
	Status    string   `json:"status"`
	Actions   []string `json:"actions"`
	ValidFrom string   `json:"valid_from"`
	ValidTo   string   `json:"valid_until"`
	Instance  bool     `json:"instance_mandate,omitempty"`
}

// Mandates lists the mandates this organisation issued.
func (s *Surface) Mandates(ctx context.Context) ([]MandateSummary, error) {
	ms, err := s.o.Store.Mandates(ctx, "local")
	if err != nil {
		return nil, err
	}
	out := []MandateSummary{}
	for _, m := range ms {
		doc, err := canonical.DecodeObject(m.Body)
		if err != nil {
			return nil, err
		}
		var acts []string
		for _, a := range doc["actions"].([]any) {
			acts = append(acts, fmt.Sprint(a))
		}
		subj, _ := doc["subject"].(map[string]any)
		who := fmt.Sprint(subj["agent_id"])
		if p, ok := subj["principal_id"].(string); ok {
			who = p
		}
		out = append(out, MandateSummary{
			ID: m.ID, Subject: who, Status: m.Status, Actions: acts,
			ValidFrom: fmt.Sprint(doc["valid_from"]), ValidTo: fmt.Sprint(doc["valid_until"]),
			Instance: instance.IsInstanceMandate(doc),
		})
	}
	return out, nil
}

// knownActs refuses a mandate listing an act party does not take: a
// misspelt act ("offer.acept") would be signed, and every act the
// principal meant to allow refused, without a word. The mandate schema
// allows any dotted name (another implementation may take other acts);
// this instance signs only those it evaluates.
func knownActs(actions []string) error {
	var unknown []string
	for _, a := range actions {
		if !slices.Contains(protocol.Acts, protocol.Act(a)) && a != instance.KeyRecordAction {
			unknown = append(unknown, strconv.Quote(a))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	known := make([]string, len(protocol.Acts))
	for i, a := range protocol.Acts {
		known[i] = string(a)
	}
	return fmt.Errorf("principal: %s %s not an act party takes; the acts are %s",
		strings.Join(unknown, ", "), map[bool]string{true: "is", false: "are"}[len(unknown) == 1], strings.Join(known, ", "))
}
