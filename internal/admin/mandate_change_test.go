package admin_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/principal"
)

// TestMandateChangeErrors: each reason a status change does not apply is
// its own sentinel on the principal's surface and its own HTTP status on
// the admin API: 403 for a mandate another organisation issued, 409 for a
// mandate not in the status the change applies to or already revoked.
func TestMandateChangeErrors(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	p := f.n.Principal(t)

	// A mandate this instance holds but did not issue.
	foreign := "mnd_0123456789abcdef0123dddd"
	body, err := canonical.Marshal(map[string]any{
		"id": foreign, "represented_organization_id": "org_delta",
		"subject": map[string]any{"agent_id": "agt_delta_agent"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.n.Org.Store.PutMandate(ctx, body, "org_delta"); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(context.Context, string, string) error{"suspend": p.Suspend, "reinstate": p.Reinstate, "revoke": p.Revoke} {
		if err := change(ctx, foreign, ""); !errors.Is(err, principal.ErrNotLocal) {
			t.Errorf("%s a foreign mandate: %v, want ErrNotLocal", name, err)
		}
	}

	own := "mnd_0123456789abcdef0123cccc"
	if _, err := p.IssueMandate(ctx, request(time.Now().UTC(), own)); err != nil {
		t.Fatal(err)
	}
	if err := p.Reinstate(ctx, own, ""); !errors.Is(err, principal.ErrWrongStatus) {
		t.Errorf("reinstate an active mandate: %v, want ErrWrongStatus", err)
	}

	for _, step := range []struct {
		id, change string
		code       int
		detail     string
	}{
		{foreign, "suspend", http.StatusForbidden, "another organisation"},
		{foreign, "revoke", http.StatusForbidden, "another organisation"},
		{own, "reinstate", http.StatusConflict, "is active, not suspended"},
		{own, "suspend", http.StatusOK, ""},
		{own, "suspend", http.StatusConflict, "is suspended, not active"},
		{own, "revoke", http.StatusOK, ""},
		{own, "revoke", http.StatusConflict, "revocation is final"},
		{own, "suspend", http.StatusConflict, "revocation is final"},
		{own, "reinstate", http.StatusConflict, "revocation is final"},
		{"mnd_ffffffffffffffffffffffff", "suspend", http.StatusNotFound, ""},
	} {
		resp, body := f.do(t, call{method: "POST", path: "/api/mandates/" + step.id + "/" + step.change, bearer: f.adminTok})
		if resp.StatusCode != step.code || !strings.Contains(body, step.detail) {
			t.Errorf("%s %s: %d %s, want %d with %q", step.change, step.id, resp.StatusCode, strings.TrimSpace(body), step.code, step.detail)
		}
	}
	for name, change := range map[string]func(context.Context, string, string) error{"suspend": p.Suspend, "reinstate": p.Reinstate, "revoke": p.Revoke} {
		err := change(ctx, own, "")
		if !errors.Is(err, principal.ErrFinal) {
			t.Errorf("%s a revoked mandate: %v, want ErrFinal", name, err)
		}
		if errors.Is(err, principal.ErrWrongStatus) || errors.Is(err, principal.ErrNotLocal) {
			t.Errorf("%s a revoked mandate: %v matches another sentinel", name, err)
		}
	}
}
