package canonical_test

import (
	"errors"
	"fmt"

	"github.com/partyd/party/internal/canonical"
)

// Canonicalize gives a document's RFC 8785 bytes: members sorted, no
// insignificant whitespace, strings written the one way the RFC writes
// them. What is hashed and signed is these bytes.
func ExampleCanonicalize() {
	b, err := canonical.Canonicalize([]byte(`{"total": {"currency": "EUR", "amount": "3200.00"}, "quantity": "20"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	// Output: {"quantity":"20","total":{"amount":"3200.00","currency":"EUR"}}
}

// DecodeCanonical is what a received object passes: bytes that are not
// their own canonical form are refused, since what was signed is what is
// kept.
func ExampleDecodeCanonical() {
	_, err := canonical.DecodeCanonical([]byte(`{"b":1, "a":2}`))
	fmt.Println(errors.Is(err, canonical.ErrNotCanonical))
	m, err := canonical.DecodeCanonical([]byte(`{"a":2,"b":1}`))
	fmt.Println(m["a"], err)
	// Output:
	// true
	// 2 <nil>
}

// The strict decoder refuses what A202 forbids in any document: here a
// member named twice, and a number that is not an integer.
func ExampleDecode() {
	for _, doc := range []string{`{"a":1,"a":2}`, `{"amount":3200.5}`} {
		_, err := canonical.Decode([]byte(doc))
		fmt.Println(err != nil)
	}
	// Output:
	// true
	// true
}

// Hash is the SHA-256, in lower-case hexadecimal, of a value's canonical
// bytes: an act document's action_hash, for one.
func ExampleHash() {
	h, err := canonical.Hash(map[string]any{"action_type": "offer.accept", "transaction_id": "txn_0123456789abcdef01234567"})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(h), h == canonical.SHA256Hex([]byte(`{"action_type":"offer.accept","transaction_id":"txn_0123456789abcdef01234567"}`)))
	// Output: 64 true
}
