package record

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/peering"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Receive is the receiving side of every message (delivery.Receiver; the
// daemon wraps it in a delivery.Inbox, which answers a redelivered message
// with its first reply). from is the organisation the pinned client
// certificate authenticated.
func (e *Engine) Receive(ctx context.Context, from, txn string, raw [][]byte) ([][]byte, error) {
	unlock := e.lock(txn)
	defer unlock()
	objs, err := decodeMessage(raw)
	if err != nil {
		return nil, err
	}
	if err := e.checkReceived(ctx, from, objs); err != nil {
		return nil, err
	}
	byType := map[string][]int{}
	for i, o := range objs {
		byType[typeOf(o)] = append(byType[typeOf(o)], i)
	}
	one := func(t string) object {
		if ix := byType[t]; len(ix) == 1 {
			return objs[ix[0]]
		}
		return nil
	}
	if ix := byType["transaction_event"]; len(ix) > 0 {
		if len(ix) != 1 || ix[0] != len(objs)-1 {
			return nil, reason.Refuse("a message carries one event, last")
		}
		ev := objs[ix[0]]
		support, supportRaw := objs[:len(objs)-1], raw[:len(raw)-1]
		pol := one("policy_decision")
		var check func(store.Transaction) error
		switch str(pl(ev)["event_type"]) {
		case "agreement.direct":
			check = e.checkAgreementDirect(ctx, from, txn, ev, one("acceptance"), pol, one("approval"))
		case "agreement.committed":
			check = e.checkAgreementCommitted(ctx, from, txn, ev, pol)
		case "obligation.activated":
			check = e.checkObligationActivated(ctx, from, txn, ev, support, pol)
		case "performance.declared":
			check = e.checkPerformanceDeclared(ctx, from, txn, ev, support, pol)
		case "acceptance.granted", "acceptance.rejected":
			check = e.checkResponse(ctx, from, txn, ev, support, pol)
		default:
			return nil, refusef(reason.StateTransitionDenied, "event type %v is not one this instance countersigns", pl(ev)["event_type"])
		}
		return e.receiveEvent(ctx, from, txn, ev, support, supportRaw, check)
	}
	if off := one("offer"); off != nil && len(objs) == 2 {
		return e.receiveOffer(ctx, from, txn, off, one("policy_decision"), raw)
	}
	if pol := one("policy_decision"); pol != nil && len(objs) == 1 {
		return e.receiveWithdrawal(ctx, from, txn, pol, raw[0])
	}
	if agr := one("agreement"); agr != nil && len(objs) == 1 {
		return e.receiveAgreement(ctx, from, txn, agr, raw[0])
	}
	return nil, reason.Refuse("the message is not one this instance understands: an offer with its decision, an agreement to sign, or an event with its objects")
}

func objsOf(objs []object, t string) []object {
	var out []object
	for _, o := range objs {
		if typeOf(o) == t {
			out = append(out, o)
		}
	}
	return out
}

// MandatesPath is where an instance serves its trading mandates to the
// counterparties they name (GET MandatesPath + id, pinned client
// certificate required).
const MandatesPath = "/a202/mandates/"

// MandatesHandler serves this organisation's mandates to pinned peers: a
// mandate the peer's acts are checked against is disclosed to that peer
// (and its parents, so the chain resolves), and to no one else. A mandate
// whose scope names counterparties is served only to those; the instance
// mandate (key records) to every pinned peer.
func MandatesHandler(st *store.Store, dir *peering.Directory, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		peer, err := dir.AuthenticateRequest(r)
		if err != nil {
			http.Error(w, "a pinned client certificate is required", http.StatusForbidden)
			return
		}
		id := strings.TrimPrefix(r.URL.Path, MandatesPath)
		body, ok := servable(r.Context(), st, id, peer.OrganizationID, 0)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	})
}

func servable(ctx context.Context, st *store.Store, id, peer string, depth int) ([]byte, bool) {
	rec, err := st.GetMandate(ctx, id)
	if err != nil || rec.Origin != "local" || depth > 9 {
		return nil, false
	}
	m, err := canonical.DecodeObject(rec.Body)
	if err != nil {
		return nil, false
	}
	if instance.IsInstanceMandate(m) || namesPeer(m, peer) {
		return rec.Body, true
	}
	// A parent is served when one of its children is.
	all, err := st.Mandates(ctx, "local")
	if err != nil {
		return nil, false
	}
	for _, c := range all {
		cm, err := canonical.DecodeObject(c.Body)
		if err == nil && str(cm["parent_mandate_id"]) == id {
			if _, ok := servable(ctx, st, c.ID, peer, depth+1); ok {
				return rec.Body, true
			}
		}
	}
	return nil, false
}

func namesPeer(m map[string]any, peer string) bool {
	cps, ok := sub(m, "scope")["counterparty_organization_ids"].([]any)
	if !ok {
		return true // no counterparty axis: any peer it trades with
	}
	for _, c := range cps {
		if str(c) == peer {
			return true
		}
	}
	return false
}

// HTTPMandates fetches counterparties' mandates over the pinned clients.
type HTTPMandates struct{ Clients *peering.Clients }

// FetchMandate GETs org's mandate id from its MandatesPath.
func (h HTTPMandates) FetchMandate(ctx context.Context, org, id string) ([]byte, error) {
	hc, peer, err := h.Clients.For(org)
	if err != nil {
		return nil, err
	}
	u, err := url.JoinPath(peer.BaseURL(), MandatesPath, id)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("mandate fetch: " + resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}
