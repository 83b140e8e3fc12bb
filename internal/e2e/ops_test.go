package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/instance"
)

// getWithToken fetches url with an optional bearer token.
func getWithToken(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// checkOps checks a served instance's operator endpoints as a probe and a
// scraper reach them: /healthz and /readyz on the MCP and admin listeners
// without a token, /metrics on the admin listener with the metrics token
// only. It returns the metrics scraped.
func checkOps(t *testing.T, p *demo.Party) scraped {
	t.Helper()
	mcpBase := strings.TrimSuffix(p.MCPURL, "/mcp")
	for _, base := range []string{mcpBase, p.AdminURL} {
		if code, body := getWithToken(t, base+"/healthz", ""); code != http.StatusOK || string(body) != "ok\n" {
			t.Fatalf("%s %s/healthz: %d %q", p.Name, base, code, body)
		}
		code, body := getWithToken(t, base+"/readyz", "")
		var r daemon.Readiness
		if err := json.Unmarshal(body, &r); err != nil || code != http.StatusOK || r.Status != "ready" {
			t.Fatalf("%s %s/readyz: %d %s", p.Name, base, code, body)
		}
	}
	if code, _ := getWithToken(t, mcpBase+"/metrics", ""); code != http.StatusNotFound {
		t.Fatalf("%s: the MCP listener serves /metrics: %d", p.Name, code)
	}
	metricsTok, err := instance.LoadToken(p.Dir, daemon.MetricsTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{"": 401, "not-a-token": 401, p.AdminToken: 403, p.AgentToken: 403} {
		if code, _ := getWithToken(t, p.AdminURL+"/metrics", tok); code != want {
			t.Fatalf("%s /metrics with token %q: %d, want %d", p.Name, tok, code, want)
		}
	}
	code, body := getWithToken(t, p.AdminURL+"/metrics", metricsTok)
	if code != http.StatusOK {
		t.Fatalf("%s /metrics with the metrics token: %d %s", p.Name, code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s /metrics: %v\n%s", p.Name, err, body)
	}
	return scraped{p.Name, fams}
}

// scraped is one scrape of /metrics, parsed.
type scraped struct {
	of   string
	fams map[string]*dto.MetricFamily
}

// value is the series name{labels}'s value; missing fails the test.
func (m scraped) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	f := m.fams[name]
	if f == nil {
		t.Fatalf("%s: no metric %s", m.of, name)
	}
next:
	for _, s := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case s.GetCounter() != nil:
			return s.GetCounter().GetValue()
		case s.GetGauge() != nil:
			return s.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s: no series %s%v", m.of, name, labels)
	return 0
}

// want fails the test unless name{labels} is v.
func (m scraped) want(t *testing.T, name string, labels map[string]string, v float64) {
	t.Helper()
	if got := m.value(t, name, labels); got != v {
		t.Fatalf("%s: %s%v = %v, want %v", m.of, name, labels, got, v)
	}
}

// quietLog fails the test if p's serve log holds a line of the MCP SDK's
// that is written at debug only (one per notification sent, per session).
func quietLog(t *testing.T, p *demo.Party, lines ...string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.Dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if strings.Contains(string(data), `"msg":"`+l+`"`) {
			t.Fatalf("%s's serve log holds the SDK's %q at the default level", p.Name, l)
		}
	}
}
