package deploytest

import (
	"bufio"
	"bytes"
	"fmt"
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
