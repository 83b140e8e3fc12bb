package record

// Objects this instance builds as values: their canonical bytes (RFC
// 8785) and content hash.

import "github.com/partyd/party/internal/canonical"

// contentHash recomputes an object's content hash from its decoded value.
func contentHash(o *Obj) (string, error) { return canonical.ContentHash(o.Value()) }

// viewOf turns an object this instance built as a value into a view over
// its canonical bytes.
func (e *Engine) viewOf(m map[string]any) (*Obj, error) {
	b, err := canonical.Marshal(m)
	if err != nil {
		return nil, err
	}
	return e.viewOver(m, b)
}
