package org

import (
	"maps"
	"testing"

	"github.com/partyd/party/internal/keys"
)

// A pinned principal key is parsed once for the same JWK, and parsed
// again whenever any member of the peer file's JWK changes: another key
// under the same id is resolved as the new key, and a member the JWK may
// not carry is refused even after the key resolved before.
func TestPinnedKeyFollowsThePeerFile(t *testing.T) {
	t.Parallel()
	o := &Org{}
	jwkOf := func() map[string]any {
		t.Helper()
		k, err := keys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		j, err := keys.PublicJWK(k.Public())
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	const id = "key_principal_0001"
	first, second := jwkOf(), jwkOf()
	for i, c := range []struct {
		jwk     map[string]any
		want    map[string]any // the key it must resolve to; nil: refused
		comment string
	}{
		{first, first, "the pinned key"},
		{maps.Clone(first), first, "the same members again"},
		{second, second, "another key pinned under the same id"},
		{func() map[string]any { j := maps.Clone(second); j["d"] = second["x"]; return j }(), nil, "a private member added"},
	} {
		pub, err := o.pinnedKey(id, c.jwk)
		if c.want == nil {
			if err == nil {
				t.Fatalf("%d, %s: resolved", i, c.comment)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%d, %s: %v", i, c.comment, err)
		}
		got, err := keys.PublicJWK(pub)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, c.want) {
			t.Fatalf("%d, %s: resolved to %v, want %v", i, c.comment, got, c.want)
		}
	}
}
