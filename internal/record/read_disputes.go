package record

import (
	"context"

	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/readmodel"
	"github.com/partyd/party/internal/store"
)

// disputeViews fills v's disputes, determinations and exceptions.
func (e *Engine) disputeViews(ctx context.Context, t store.Transaction, v *TransactionView) error {
	d, err := readmodel.ReadDisputes(ctx, e.db, t.ID)
	if err != nil {
		return err
	}
	v.Disputes, v.Determinations, v.Exceptions = d.Disputes, d.Determinations, d.Exceptions
	return nil
}

// ofTypeIn reads the objects of one type of txn from st, in storage order.
func ofTypeIn(ctx context.Context, st *store.Store, txn string, t protocol.ObjectType) ([]*Obj, error) {
	return parseAll(decoder{})(st.TransactionObjectsOfType(ctx, txn, string(t)))
}

// parseAll parses stored objects as a store read returned them, with p:
// parseAll(p)(st.Read(...)).
func parseAll(p parser) func(raws [][]byte, err error) ([]*Obj, error) {
	return func(raws [][]byte, err error) ([]*Obj, error) {
		if err != nil {
			return nil, err
		}
		out := make([]*Obj, 0, len(raws))
		for _, b := range raws {
			o, err := p.parse(b)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		return out, nil
	}
}
