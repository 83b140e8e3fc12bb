package record

import (
	"context"

	"github.com/partyd/party/internal/object"
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
	return object.ParseAll(st.TransactionObjectsOfType(ctx, txn, string(t)))
}
