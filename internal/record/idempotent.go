package record

// Idempotent calls: an agent's request_id makes an act happen at most
// once, recorded in the act's own commit.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// request is an idempotent call under way (Idempotent). recorded is set
// once the act it made committed: the acts that follow from it in the same
// call (formation's commit) record nothing more.
type request struct {
	scope, id, argsHash string
	recorded            bool
}

type requestKey struct{}

// actRef is what an idempotent call records about the act it made.
type actRef struct {
	TransactionID string            `json:"transaction_id"`
	Objects       map[string]string `json:"objects,omitempty"`
}

// recordRequest records the call under way, if any, in the act's commit
// transaction: a crash before the commit leaves nothing, so the call may
// be retried; after it, a retry finds the act.
func recordRequest(ctx context.Context, tx *store.Txn, txn string, names map[string]string) error {
	r, ok := ctx.Value(requestKey{}).(*request)
	if !ok || r.recorded {
		return nil
	}
	b, err := json.Marshal(actRef{TransactionID: txn, Objects: names})
	if err != nil {
		return err
	}
	err = tx.RecordRequest(r.scope, r.id, r.argsHash, string(b))
	if errors.Is(err, store.ErrRequestReused) {
		return reason.Refuse("request_id " + r.id + " was already used with other arguments; choose a new request_id for a new request")
	}
	return err
}

// requestRecorded marks the call under way as recorded, once its act
// committed.
func requestRecorded(ctx context.Context) {
	if r, ok := ctx.Value(requestKey{}).(*request); ok {
		r.recorded = true
	}
}

// ErrRequestReused is returned by Idempotent when a request id is presented
// again with other arguments.
var ErrRequestReused = errors.New("record: request id already used with other arguments")

// Idempotent runs an act at most once per (scope, request id): a call
// repeated with the same id and arguments returns the act's outcome as the
// record holds it now, without acting again; the same id with other
// arguments is refused. The record of the call is written in the act's own
// commit, so a crash mid-act leaves either no act and no record (the call
// may be retried as is) or both.
func (e *Engine) Idempotent(ctx context.Context, scope, requestID, argsHash string, run func(ctx context.Context) (Outcome, error)) (Outcome, error) {
	if requestID == "" {
		return run(ctx)
	}
	unlock := e.locks.lock("request\x00" + scope + "\x00" + requestID)
	defer unlock()
	prior, err := e.db.LookupRequest(ctx, scope, requestID)
	switch {
	case err == nil && prior.ArgsHash != argsHash:
		return Outcome{}, reason.Refuse("request_id " + requestID + " was already used with other arguments; choose a new request_id for a new request")
	case err == nil:
		var ref actRef
		if err := json.Unmarshal([]byte(prior.Act), &ref); err != nil {
			return Outcome{}, err
		}
		out, err := e.outcome(ctx, ref.TransactionID, ref.Objects)
		if out.Status == StatusRecorded && !slices.ContainsFunc(keysOf(ref.Objects), func(k string) bool { return k == "event" }) {
			out.Status = StatusDelivered
		}
		return out, err
	case !errors.Is(err, store.ErrNotFound):
		return Outcome{}, err
	}
	return run(context.WithValue(ctx, requestKey{}, &request{scope: scope, id: requestID, argsHash: argsHash}))
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
