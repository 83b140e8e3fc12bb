package admin_test

import (
	"strings"
	"testing"

	"github.com/partyd/party/internal/admin"
	"github.com/partyd/party/internal/protocol"
)

// TestEveryActSaidInWords: the pages say every act party takes in words,
// not as its registered name turned into a sentence; an act added to
// package protocol without its words fails here.
func TestEveryActSaidInWords(t *testing.T) {
	t.Parallel()
	for _, a := range protocol.Acts {
		fallback := strings.ReplaceAll(string(a), ".", " ")
		if p := admin.ActPhrase(string(a)); strings.EqualFold(strings.TrimSuffix(p, " ("+string(a)+")"), fallback) {
			t.Errorf("act %s has no words of its own: %q", a, p)
		}
	}
}
