package deploytest

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Dockerfile is what the checks need of a Dockerfile: the defaults of the
// ARGs declared before the first FROM, and the stages.
type Dockerfile struct {
	Args   map[string]string
	Stages []Stage
}

// Stage is one FROM ... AS name block.
type Stage struct {
	Name string // "" when unnamed
	From string // the image or stage it starts from, as written
	User string // the last USER instruction in the stage, "" if none
	// Instructions are the stage's instructions, keyword upper-cased,
	// continuation lines joined.
	Instructions []string
}

// Stage returns the stage called name.
func (d Dockerfile) Stage(name string) (Stage, bool) {
	for _, s := range d.Stages {
		if s.Name == name {
			return s, true
		}
	}
	return Stage{}, false
}

// ParseDockerfile reads the instructions of a Dockerfile. It understands
// comments, line continuations, ARG and FROM; it does not expand variables.
func ParseDockerfile(data []byte) (Dockerfile, error) {
	d := Dockerfile{Args: map[string]string{}}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(l)
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		return d, err
	}
	if cur.Len() > 0 {
		return d, fmt.Errorf("dockerfile: ends inside a continued line")
	}
	for _, l := range lines {
		kw, rest, _ := strings.Cut(l, " ")
		kw = strings.ToUpper(kw)
		rest = strings.TrimSpace(rest)
		ins := kw + " " + rest
		switch {
		case kw == "FROM":
			f := strings.Fields(rest)
			var st Stage
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) == 0 {
				return d, fmt.Errorf("dockerfile: FROM without an image")
			}
			st.From = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			st.Instructions = []string{ins}
			d.Stages = append(d.Stages, st)
		case len(d.Stages) == 0:
			if kw == "ARG" {
				k, v, _ := strings.Cut(rest, "=")
				d.Args[k] = v
			}
		default:
			st := &d.Stages[len(d.Stages)-1]
			st.Instructions = append(st.Instructions, ins)
			if kw == "USER" {
				st.User = rest
			}
		}
	}
	if len(d.Stages) == 0 {
		return d, fmt.Errorf("dockerfile: no FROM")
	}
	return d, nil
}

// classicOnlyArgs are the platform ARGs BuildKit fills in by itself. The
// classic builder leaves them empty, so `FROM --platform=$BUILDPLATFORM`
// fails to parse there, and GOOS=$TARGETOS means nothing.
var classicOnlyArgs = []string{"BUILDPLATFORM", "BUILDOS", "BUILDARCH", "BUILDVARIANT",
	"TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT"}

// classicCopyFlags are the COPY and ADD flags the classic builder knows.
var classicCopyFlags = []string{"--from=", "--chown="}

// ClassicBuilderProblems lists what in a Dockerfile only BuildKit builds:
// what an engine without BuildKit (DOCKER_BUILDKIT=0, Compose v1, a
// daemon with BuildKit off) refuses or gets wrong. raw is the file as
// written, for the parser directives that ParseDockerfile skips as
// comments.
func ClassicBuilderProblems(raw []byte, d Dockerfile) []string {
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		// Parser directives come first, as "# key=value" lines.
		line := strings.TrimSpace(sc.Text())
		key, _, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), "=")
		if !strings.HasPrefix(line, "#") || !ok || strings.ContainsAny(strings.TrimSpace(key), " \t") {
			break
		}
		if strings.EqualFold(strings.TrimSpace(key), "syntax") {
			// The classic builder ignores it; BuildKit fetches that
			// frontend image from a registry, which an offline engine
			// cannot.
			problems = append(problems, "a syntax directive: BuildKit fetches its frontend image, the classic builder ignores it")
		}
	}
	var all []string
	for _, st := range d.Stages {
		all = append(all, st.Instructions...)
	}
	for _, ins := range all {
		kw, rest, _ := strings.Cut(ins, " ")
		for _, a := range classicOnlyArgs {
			if strings.Contains(rest, "$"+a) || strings.Contains(rest, "${"+a) {
				problems = append(problems, fmt.Sprintf("%q uses %s, which only BuildKit sets", ins, a))
			}
		}
		if strings.Contains(rest, "<<") && (kw == "RUN" || kw == "COPY" || kw == "ADD") {
			problems = append(problems, fmt.Sprintf("%q: a heredoc, which only BuildKit reads", ins))
		}
		f := strings.Fields(rest)
		var flags []string
		for len(f) > 0 && strings.HasPrefix(f[0], "--") {
			flags, f = append(flags, f[0]), f[1:]
		}
		switch kw {
		case "RUN":
			if len(flags) > 0 {
				problems = append(problems, fmt.Sprintf("%q: RUN %s is BuildKit's", ins, flags[0]))
			}
		case "COPY", "ADD":
			for _, fl := range flags {
				if !slices.ContainsFunc(classicCopyFlags, func(k string) bool { return strings.HasPrefix(fl, k) }) {
					problems = append(problems, fmt.Sprintf("%q: %s %s is BuildKit's", ins, kw, fl))
				}
			}
			// Only BuildKit reads deploy/Dockerfile.dockerignore: the
			// classic builder would copy the whole repository, state
			// directories and keys left in a checkout included.
			fromStage := slices.ContainsFunc(flags, func(fl string) bool { return strings.HasPrefix(fl, "--from=") })
			if len(f) >= 2 && !fromStage && (f[0] == "." || f[0] == "./") {
				problems = append(problems, fmt.Sprintf("%q copies the whole build context, which the classic builder does not filter", ins))
			}
		}
	}
	return problems
}
