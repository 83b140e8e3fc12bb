package deploytest

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDockerfileBuildsWithoutBuildKit holds deploy/Dockerfile to what the
// classic builder builds (an engine without BuildKit, or Compose v1): the
// checker finds nothing in the real file, and finds each BuildKit-only
// construct put back into it, the two that broke `docker compose up
// --build` there among them (`--platform=$BUILDPLATFORM`, cache mounts).
// deploy/compose-check.sh builds the file with the classic builder for
// real where an engine is present.
func TestDockerfileBuildsWithoutBuildKit(t *testing.T) {
	raw, err := os.ReadFile(repoPath("deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(data string) []string {
		t.Helper()
		d, err := ParseDockerfile([]byte(data))
		if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		return ClassicBuilderProblems([]byte(data), d)
	}
	if p := check(string(raw)); len(p) != 0 {
		t.Fatalf("deploy/Dockerfile needs BuildKit:\n  %s", strings.Join(p, "\n  "))
	}
	const build = "FROM golang:${GO_VERSION} AS build\n"
	for name, edit := range map[string]func(string) string{
		"a syntax directive": func(s string) string { return "# syntax=docker/dockerfile:1\n" + s },
		"the build platform": func(s string) string {
			return strings.Replace(s, build, "FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build\n", 1)
		},
		"the target arch": func(s string) string {
			return strings.Replace(s, build, build+"ARG TARGETARCH\nENV GOARCH=${TARGETARCH}\n", 1)
		},
		"a cache mount": func(s string) string {
			return strings.Replace(s, "RUN go mod download", "RUN --mount=type=cache,target=/go/pkg/mod go mod download", 1)
		},
		"COPY --chmod": func(s string) string {
			return strings.Replace(s, "COPY deploy/init.sh /deploy/init.sh", "COPY --chmod=0755 deploy/init.sh /deploy/init.sh", 1)
		},
		"COPY --link": func(s string) string {
			return strings.Replace(s, "COPY cmd/ cmd/", "COPY --link cmd/ cmd/", 1)
		},
		"a heredoc": func(s string) string {
			return strings.Replace(s, build, build+"RUN <<EOF\nmkdir /x\nEOF\n", 1)
		},
		"the whole context": func(s string) string {
			return strings.Replace(s, "COPY cmd/ cmd/", "COPY . .", 1)
		},
	} {
		broken := edit(string(raw))
		if broken == string(raw) {
			t.Errorf("%s: the edit did not apply; update the test with the Dockerfile", name)
			continue
		}
		if p := check(broken); len(p) == 0 {
			t.Errorf("%s: not found", name)
		}
	}
}

// TestStandInsCoverTheBases keeps deploy/compose-check.sh, which imports
// stand-ins for the base images on an engine that can pull nothing, in
// step with deploy/Dockerfile: every image a stage starts from (not one of
// its own stages) has a case of the script's standin function, named as
// the script names it (the image without its tag), so that a new base
// fails here rather than only where an engine runs the script.
func TestStandInsCoverTheBases(t *testing.T) {
	raw, err := os.ReadFile(repoPath("deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDockerfile(raw)
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(repoPath("deploy", "compose-check.sh"))
	if err != nil {
		t.Fatal(err)
	}
	bases := 0
	for _, st := range d.Stages {
		if _, own := d.Stage(st.From); own {
			continue
		}
		bases++
		name, _, _ := strings.Cut(st.From, ":")
		if !regexp.MustCompile(`(?m)^\t` + regexp.QuoteMeta(name) + `\)$`).Match(script) {
			t.Errorf("%s (stage %s): deploy/compose-check.sh has no stand-in case %s)", st.From, st.Name, name)
		}
	}
	if bases != 3 {
		t.Errorf("deploy/Dockerfile starts from %d images, want 3 (golang, busybox, distroless)", bases)
	}
}

// composeV1TopLevel and composeV1Healthcheck are the keys docker-compose
// 1.29 (Compose v1, Debian 12's package) accepts at the top of a file and
// in a health check; it refuses the file over any other (x- extensions
// aside), as it did over `name` and `start_interval`.
var (
	composeV1TopLevel    = []string{"version", "services", "networks", "volumes", "secrets", "configs"}
	composeV1Healthcheck = []string{"test", "interval", "timeout", "retries", "start_period", "disable"}
)

// TestComposeFileRunsOnComposeV1 keeps docker-compose.yml within what
// Compose v1 reads, where deploy/compose-check.sh cannot run it (no engine
// in CI): no top-level key or health check key v1 refuses.
func TestComposeFileRunsOnComposeV1(t *testing.T) {
	doc := loadCompose(t, repoPath("docker-compose.yml")).(map[string]any)
	for k := range doc {
		if !strings.HasPrefix(k, "x-") && !slices.Contains(composeV1TopLevel, k) {
			t.Errorf("top-level %q: Compose v1 refuses the file", k)
		}
	}
	services, _ := doc["services"].(map[string]any)
	checked := 0
	for name, s := range services {
		hc, _ := s.(map[string]any)["healthcheck"].(map[string]any)
		for k := range hc {
			if !slices.Contains(composeV1Healthcheck, k) {
				t.Errorf("service %s: healthcheck %q: Compose v1 refuses the file", name, k)
			}
		}
		if hc != nil {
			checked++
		}
	}
	if checked != 2 {
		t.Errorf("%d services have a health check, want the two instances'", checked)
	}
}
