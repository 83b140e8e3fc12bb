package deploytest

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/partyd/party/internal/spectest"
)

func repoPath(parts ...string) string {
	return filepath.Join(append([]string{spectest.RepoRoot()}, parts...)...)
}

func loadCompose(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseYAML(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func composeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	p := spectest.SharedFile(t, "compose-spec/compose-spec.json")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("compose-spec.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("compose-spec.json")
	if err != nil {
		t.Fatalf("compile the Compose Specification schema: %v", err)
	}
	return sch
}

func problems(r Report) string {
	var b strings.Builder
	for _, p := range r.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// TestComposeFileHoldsTheInvariants is the guard on docker-compose.yml:
// every invariant holds, and the checker saw what it should have seen, so
// that a file it cannot read does not pass for a clean one.
func TestComposeFileHoldsTheInvariants(t *testing.T) {
	r := Check(loadCompose(t, repoPath("docker-compose.yml")), DefaultPolicy)
	for _, p := range r.Problems {
		t.Errorf("docker-compose.yml breaks an invariant: %s", p)
	}
	wantOrgs := map[string][]string{
		"org_northstar": {"northstar", "northstar-init", "northstar-pin"},
		"org_delta":     {"delta", "delta-init", "delta-pin"},
	}
	if !reflect.DeepEqual(r.Organizations, wantOrgs) {
		t.Errorf("organisations %v, want %v", r.Organizations, wantOrgs)
	}
	// The project is named by the directory or -p (the file names none, for
	// Compose v1): volumes are <project>_NAME.
	wantKeys := map[string]string{"volume:<project>_northstar-state": "org_northstar", "volume:<project>_delta-state": "org_delta"}
	if !reflect.DeepEqual(r.KeyVolumes, wantKeys) {
		t.Errorf("key volumes %v, want %v", r.KeyVolumes, wantKeys)
	}
	if want := []string{"volume:<project>_peers"}; !reflect.DeepEqual(r.PeersVolumes, want) {
		t.Errorf("peers volumes %v, want %v", r.PeersVolumes, want)
	}
	if want := []string{"agents"}; !reflect.DeepEqual(r.Unaffiliated, want) {
		t.Errorf("services acting for no organisation %v, want %v", r.Unaffiliated, want)
	}
	if want := []string{"delta", "northstar"}; !reflect.DeepEqual(r.LongRunning, want) {
		t.Errorf("long-running services %v, want %v", r.LongRunning, want)
	}
	wantPorts := []string{
		"delta: 127.0.0.1 -> 7401-7401", "delta: 127.0.0.1 -> 7403-7403",
		"northstar: 127.0.0.1 -> 7401-7401", "northstar: 127.0.0.1 -> 7403-7403",
	}
	if !reflect.DeepEqual(r.Published, wantPorts) {
		t.Errorf("published ports %v, want %v", r.Published, wantPorts)
	}
}

// TestComposeFilesMatchTheSchema validates the real file and the negative
// cases against the Compose Specification, so that the negative cases fail
// the checker for their one broken invariant, not for being malformed.
func TestComposeFilesMatchTheSchema(t *testing.T) {
	sch := composeSchema(t)
	files := []string{repoPath("docker-compose.yml")}
	neg, err := filepath.Glob(filepath.Join("testdata", "compose-*.yml"))
	if err != nil || len(neg) == 0 {
		t.Fatalf("no negative cases in testdata: %v", err)
	}
	for _, f := range append(files, neg...) {
		if err := sch.Validate(loadCompose(t, f)); err != nil {
			t.Errorf("%s does not match the Compose Specification:\n%v", f, err)
		}
	}
}

// TestSchemaRejectsMalformedCompose shows the validation has teeth.
func TestSchemaRejectsMalformedCompose(t *testing.T) {
	sch := composeSchema(t)
	for name, src := range map[string]string{
		"unknown service member": "services:\n  a:\n    image: x\n    volumez: []\n",
		"bad condition":          "services:\n  a:\n    image: x\n    depends_on:\n      b:\n        condition: service_ready\n  b:\n    image: x\n",
		"ports not a list":       "services:\n  a:\n    image: x\n    ports: \"127.0.0.1:1:1\"\n",
	} {
		v, err := ParseYAML([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if sch.Validate(v) == nil {
			t.Errorf("%s: the schema accepted it", name)
		}
	}
}

// TestCheckerRejectsTheNegativeCases runs the checker on the files in
// testdata: each must fail for its invariant and only for it.
func TestCheckerRejectsTheNegativeCases(t *testing.T) {
	for file, want := range map[string]struct {
		rule, mention string
	}{
		"compose-leaks-keys.yml": {RuleKeyIsolation, "acts for org_delta but mounts volume:party-leaks-keys_northstar-state at /northstar, which holds org_northstar's keys"},
		"compose-mcp-public.yml": {RuleLoopback, "publishes container port 7401 on 0.0.0.0"},
	} {
		r := Check(loadCompose(t, filepath.Join("testdata", file)), DefaultPolicy)
		t.Logf("%s:%s", file, problems(r))
		if len(r.Problems) == 0 {
			t.Errorf("%s: the checker passed it", file)
			continue
		}
		for _, p := range r.Problems {
			if p.Rule != want.rule {
				t.Errorf("%s: unexpected problem %s", file, p)
			}
		}
		if !strings.Contains(problems(r), want.mention) {
			t.Errorf("%s: no problem says %q:%s", file, want.mention, problems(r))
		}
	}
}

func service(t *testing.T, doc any, name string) map[string]any {
	t.Helper()
	s, ok := doc.(map[string]any)["services"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("no service %s", name)
	}
	return s
}

func appendVolume(t *testing.T, doc any, svc string, v any) {
	s := service(t, doc, svc)
	list, _ := s["volumes"].([]any)
	s["volumes"] = append(list, v)
}

func fromJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCheckerCatchesBreaksOfTheRealFile breaks docker-compose.yml one way
// at a time and expects the checker to name the invariant.
func TestCheckerCatchesBreaksOfTheRealFile(t *testing.T) {
	cases := []struct {
		name   string
		rule   string
		break_ func(t *testing.T, doc any)
	}{
		{"delta mounts northstar's state", RuleKeyIsolation, func(t *testing.T, doc any) {
			appendVolume(t, doc, "delta", "northstar-state:/backup:ro")
		}},
		{"delta's pin step mounts northstar's state at /data", RuleKeyIsolation, func(t *testing.T, doc any) {
			service(t, doc, "delta-pin")["volumes"] = []any{"northstar-state:/data", "peers:/peers:ro"}
		}},
		{"the agents mount northstar's state", RuleKeyIsolation, func(t *testing.T, doc any) {
			appendVolume(t, doc, "agents", fromJSON(t, `{"type": "volume", "source": "northstar-state", "target": "/state", "read_only": true, "volume": {"subpath": "tokens"}}`))
		}},
		{"the agents inherit delta's volumes", RuleKeyIsolation, func(t *testing.T, doc any) {
			service(t, doc, "agents")["volumes_from"] = []any{"delta:ro"}
		}},
		{"a second name for northstar's state", RuleKeyIsolation, func(t *testing.T, doc any) {
			// With the project named, as -p or a v2 file's name would.
			doc.(map[string]any)["name"] = "party"
			doc.(map[string]any)["volumes"].(map[string]any)["archive"] = map[string]any{"name": "party_northstar-state"}
			appendVolume(t, doc, "delta-init", "archive:/archive")
		}},
		{"the agents' token mount is writable", RuleKeyIsolation, func(t *testing.T, doc any) {
			service(t, doc, "agents")["volumes"].([]any)[0].(map[string]any)["read_only"] = false
		}},
		{"a bind mount over a bind-mounted state directory", RuleKeyIsolation, func(t *testing.T, doc any) {
			service(t, doc, "northstar")["volumes"] = []any{"./state/northstar:/data"}
			appendVolume(t, doc, "delta", "./state/northstar/tokens:/x:ro")
		}},
		{"delta labelled as northstar", RuleOrganization, func(t *testing.T, doc any) {
			service(t, doc, "delta")["labels"] = []any{"org.partyd.organization=org_northstar"}
		}},
		{"northstar's MCP on every interface", RuleLoopback, func(t *testing.T, doc any) {
			service(t, doc, "northstar")["ports"] = []any{"7401:7401", "127.0.0.1:7403:7403"}
		}},
		{"delta's admin port without host_ip", RuleLoopback, func(t *testing.T, doc any) {
			service(t, doc, "delta")["ports"] = []any{"127.0.0.1:7501:7401", fromJSON(t, `{"target": 7403, "published": "7503"}`)}
		}},
		{"a bare container port", RuleLoopback, func(t *testing.T, doc any) {
			service(t, doc, "delta")["ports"] = []any{fromJSON(t, `7401`)}
		}},
		{"a port range reaching the admin port", RuleLoopback, func(t *testing.T, doc any) {
			service(t, doc, "delta")["ports"] = []any{"0.0.0.0:7402-7403:7402-7403"}
		}},
		{"host networking", RuleLoopback, func(t *testing.T, doc any) {
			service(t, doc, "northstar")["network_mode"] = "host"
		}},
		{"the peers volume at /data", RulePeersVolume, func(t *testing.T, doc any) {
			appendVolume(t, doc, "agents", "peers:/data:ro")
		}},
		{"the peers volume elsewhere", RulePeersVolume, func(t *testing.T, doc any) {
			appendVolume(t, doc, "northstar", "peers:/tokens")
		}},
		{"northstar without a health check", RuleHealthcheck, func(t *testing.T, doc any) {
			delete(service(t, doc, "northstar"), "healthcheck")
		}},
		{"delta's health check disabled", RuleHealthcheck, func(t *testing.T, doc any) {
			service(t, doc, "delta")["healthcheck"] = map[string]any{"disable": true}
		}},
		{"the agents running forever without a health check", RuleHealthcheck, func(t *testing.T, doc any) {
			delete(service(t, doc, "agents"), "restart")
		}},
		{"an init step restarted when done", RuleDependency, func(t *testing.T, doc any) {
			service(t, doc, "northstar-init")["restart"] = "unless-stopped"
			service(t, doc, "northstar-init")["healthcheck"] = service(t, doc, "northstar")["healthcheck"]
		}},
		{"extends", RuleUnsupported, func(t *testing.T, doc any) {
			service(t, doc, "agents")["extends"] = map[string]any{"service": "delta"}
		}},
		{"interpolated mount", RuleUnsupported, func(t *testing.T, doc any) {
			appendVolume(t, doc, "delta", "${STATE}:/x")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := loadCompose(t, repoPath("docker-compose.yml"))
			tc.break_(t, doc)
			r := Check(doc, DefaultPolicy)
			t.Logf("%s", problems(r))
			if !r.Has(tc.rule) {
				t.Fatalf("no %s problem; got:%s", tc.rule, problems(r))
			}
		})
	}
}

func TestParsePort(t *testing.T) {
	for _, tc := range []struct {
		in     string // JSON
		ip     string
		lo, hi int
	}{
		{`"127.0.0.1:7401:7401"`, "127.0.0.1", 7401, 7401},
		{`"127.0.0.1::7401/tcp"`, "127.0.0.1", 7401, 7401},
		{`"7501:7401"`, "", 7401, 7401},
		{`"7401"`, "", 7401, 7401},
		{`7401`, "", 7401, 7401},
		{`"[::1]:7401:7401"`, "::1", 7401, 7401},
		{`"::1:7401:7401"`, "::1", 7401, 7401},
		{`"0.0.0.0:7401-7403:7401-7403/udp"`, "0.0.0.0", 7401, 7403},
		{`{"target": 7403, "host_ip": "127.0.0.1", "published": "7503"}`, "127.0.0.1", 7403, 7403},
		{`{"target": "7402", "published": 7402}`, "", 7402, 7402},
	} {
		ip, lo, hi, err := parsePort(fromJSON(t, tc.in))
		if err != nil || ip != tc.ip || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: %q %d-%d %v, want %q %d-%d", tc.in, ip, lo, hi, err, tc.ip, tc.lo, tc.hi)
		}
	}
	for _, bad := range []string{`"127.0.0.1:x:y"`, `"7403-7401"`, `{"published": "1"}`, `true`, `"[::1]7401"`} {
		if _, _, _, err := parsePort(fromJSON(t, bad)); err == nil {
			t.Errorf("%s: read", bad)
		}
	}
}

// TestDockerfile checks what the compose file and go.mod rely on: the go
// line's version in the build stage, the stages compose builds, and a
// runtime stage that is distroless and not root.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(repoPath("deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDockerfile(data)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(repoPath("go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if got := d.Args["GO_VERSION"]; got != string(m[1]) {
		t.Errorf("Dockerfile GO_VERSION %q, go.mod's go line %q", got, m[1])
	}
	build, ok := d.Stage("build")
	if !ok || build.From != "golang:${GO_VERSION}" {
		t.Errorf("build stage %+v, want FROM golang:${GO_VERSION} AS build", build)
	}
	for _, want := range []string{"./cmd/party", "./examples/two-party", "CGO_ENABLED=0", "-trimpath"} {
		if !slices.ContainsFunc(build.Instructions, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("the build stage does not mention %s", want)
		}
	}

	last := d.Stages[len(d.Stages)-1]
	if !strings.HasPrefix(last.From, "gcr.io/distroless/") || !strings.HasSuffix(last.From, ":nonroot") {
		t.Errorf("the runtime stage starts from %s, want a distroless :nonroot image", last.From)
	}
	for _, st := range d.Stages[1:] {
		if u := strings.Split(st.User, ":")[0]; u == "" || u == "0" || u == "root" {
			t.Errorf("stage %s runs as %q, want a non-root user", st.Name, st.User)
		}
	}
	for _, want := range []string{`ENTRYPOINT ["/party"]`, "EXPOSE 7401 7402 7403", `VOLUME ["/data"]`} {
		if !slices.Contains(last.Instructions, want) {
			t.Errorf("the runtime stage lacks %s", want)
		}
	}

	// Every image compose builds comes from a stage of this Dockerfile,
	// and the images it runs are the ones it builds.
	doc := loadCompose(t, repoPath("docker-compose.yml")).(map[string]any)
	built := map[string]string{}
	for name, s := range doc["services"].(map[string]any) {
		s := s.(map[string]any)
		b, ok := s["build"].(map[string]any)
		if !ok {
			t.Errorf("service %s does not build its image from this repository", name)
			continue
		}
		target, _ := b["target"].(string)
		if _, ok := d.Stage(target); !ok || b["context"] != "." || b["dockerfile"] != "deploy/Dockerfile" {
			t.Errorf("service %s builds %v, not a stage of deploy/Dockerfile", name, b)
		}
		img, _ := s["image"].(string)
		if prev, ok := built[img]; ok && prev != target {
			t.Errorf("image %s is built from stages %s and %s", img, prev, target)
		}
		built[img] = target
	}
}

// TestMandateRequestsIssue issues each request in deploy/mandates through
// the principal's surface of a fresh instance, as deploy/init.sh has `party
// mandate issue` do, so a request the evaluator would refuse fails here.
func TestMandateRequestsIssue(t *testing.T) {
	files, err := filepath.Glob(repoPath("deploy", "mandates", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mandate requests in deploy/mandates: %v", err)
	}
	r := Check(loadCompose(t, repoPath("docker-compose.yml")), DefaultPolicy)
	for _, f := range files {
		org := strings.TrimSuffix(filepath.Base(f), ".json")
		if _, ok := r.Organizations[org]; !ok {
			t.Errorf("%s is named after no organisation of docker-compose.yml", f)
			continue
		}
		t.Run(org, func(t *testing.T) { issueRequest(t, org, f) })
	}
}
