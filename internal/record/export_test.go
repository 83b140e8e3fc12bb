package record

import (
	"context"

	"github.com/partyd/party/internal/canonical"
)

// ObserveWorkingSets has f told the size of every working set the engines
// of this process build (objects held, mandates), with its transaction,
// until the returned function is called.
func ObserveWorkingSets(f func(txn string, n, mandates int)) func() {
	testingOnlyWorkingSet.Store(&f)
	return func() { testingOnlyWorkingSet.Store(nil) }
}

// MandateBytesOf returns what mandateBytes finds for this engine's own
// mandate id, for its shared view (ownMandate) and for an equal copy of
// it decoded apart.
func MandateBytesOf(ctx context.Context, e *Engine, id string) (ofView, ofCopy []byte, err error) {
	m, err := e.ownMandate(ctx, instanceActor, id)
	if err != nil {
		return nil, nil, err
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	c, err := canonical.DecodeObject(b)
	if err != nil {
		return nil, nil, err
	}
	return e.mandateBytes(ctx, m), e.mandateBytes(ctx, c), nil
}

// WaitProbes waits for the probes e has in flight (probeAway) to answer.
func WaitProbes(e *Engine) { e.probes.Wait() }
