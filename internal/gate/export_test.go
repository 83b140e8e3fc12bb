package gate

import "testing"

// WithoutSchemaLayer switches the schema layer off for the rest of the
// test, so a test can show the normative checks name every code alone.
func WithoutSchemaLayer(t testing.TB) {
	schemaLayerOn = false
	t.Cleanup(func() { schemaLayerOn = true })
}
