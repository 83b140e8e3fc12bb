package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/spectest"
	"github.com/partyd/party/internal/store"
)

// readmeSection is the README section whose every block the test runs.
const readmeSection = "## Your own instance"

// readmeBlocks returns the fenced blocks of the README section named
// heading, in order. Every block of it must be marked sh: a block of
// another kind would be a step the test does not run.
func readmeBlocks(readme []byte, heading string) ([]string, error) {
	var blocks []string
	var cur *strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(readme)))
	for sc.Scan() {
		line := sc.Text()
		if cur == nil && strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = line == heading
			continue
		}
		if !in {
			continue
		}
		fence, rest := strings.HasPrefix(line, "```"), strings.TrimPrefix(line, "```")
		switch {
		case fence && cur == nil:
			if strings.TrimSpace(rest) != "sh" {
				return nil, fmt.Errorf("a block marked %q in %q: every block there must be sh, run by this test", rest, heading)
			}
			cur = &strings.Builder{}
		case fence:
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	switch {
	case cur != nil:
		return nil, fmt.Errorf("%q ends inside a block", heading)
	case !in:
		return nil, fmt.Errorf("README.md has no section %q", heading)
	case len(blocks) == 0:
		return nil, fmt.Errorf("%q has no blocks", heading)
	}
	return blocks, nil
}

// TestReadmeByHand runs every block of the README's "Your own instance"
// section, as written, in order, in one bash with `set -euo pipefail`,
// in an empty directory with the party binary first on $PATH: the two
// organisations' setup and mandates, both instances served, the agents'
// acts through `party call`, the principal's approval, both exports and
// `party verify` on each. A failing command fails the test. Then, apart
// from what the README prints, it checks what the trade left: both
// records hold the transaction `completed`, and the two exports verify,
// hold the same events and end in transaction.completed.
//
// The README's listeners are its own fixed loopback ports, as a reader
// would use them: the test fails at once, naming the port, if one is
// taken (an instance or the compose demo running on this machine).
func TestReadmeByHand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(spectest.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(readme, readmeSection)
	if err != nil {
		t.Fatal(err)
	}
	script := strings.Join(blocks, "\n")
	addrs := regexp.MustCompile(`127\.0\.0\.1:\d+`).FindAllString(script, -1)
	slices.Sort(addrs)
	for _, addr := range slices.Compact(addrs) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the README's address %s is taken (is an instance or the compose demo running?): %v", addr, err)
		}
		l.Close()
	}

	work := t.TempDir()
	out, err := os.Create(filepath.Join(t.TempDir(), "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = work
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARTY_DIR=") { // --dir is always given; no default may leak in
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PATH="+filepath.Dir(partyBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A file, not a pipe: the instances the README starts in the
	// background keep their own output, and Wait must not wait for them.
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that the instances it leaves running end
	// with the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	runErr := cmd.Wait()
	logs := func() string {
		b, _ := os.ReadFile(out.Name())
		s := "output:\n" + string(b)
		for _, f := range []string{"northstar.log", "delta.log"} {
			if l, err := os.ReadFile(filepath.Join(work, f)); err == nil {
				s += "\n" + f + " (last lines):\n" + lastLines(string(l), 20)
			}
		}
		return s
	}
	if runErr != nil {
		t.Fatalf("the README's commands failed: %v\n%s", runErr, logs())
	}

	// What the trade left, read apart from what the commands printed.
	var states, bundles []string
	err = filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch d.Name() {
		case instance.ConfigFile:
			states = append(states, filepath.Dir(p))
		case "bundle.json":
			bundles = append(bundles, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 || len(bundles) != 2 {
		t.Fatalf("the README left %d state directories %v and %d bundles %v, want two of each\n%s", len(states), states, len(bundles), bundles, logs())
	}
	var txn string
	var events [][]string
	for _, dir := range bundles {
		b, err := bundle.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		if txn == "" {
			txn = b.Manifest.TransactionID
		} else if b.Manifest.TransactionID != txn {
			t.Fatalf("the bundles are of %s and %s", txn, b.Manifest.TransactionID)
		}
		rep, hashes, err := demo.Check(dir)
		if err != nil {
			t.Fatal(err)
		}
		if r := rep.Results; r.Failed != 0 || r.NotCheckable != 0 || r.Verified == 0 {
			t.Fatalf("%s: %d verified, %d failed, %d not checkable: %v", dir, r.Verified, r.Failed, r.NotCheckable, rep.Failures())
		}
		if last := lastEvent(b); last["to_state"] != "completed" {
			t.Fatalf("%s ends in %v (%v), not completed", dir, last["to_state"], last["event_type"])
		}
		events = append(events, hashes)
	}
	if !slices.Equal(events[0], events[1]) {
		t.Fatalf("the two exports hold different events:\n%v\n%v", events[0], events[1])
	}
	orgs := map[string]bool{}
	for _, dir := range states {
		cfg, err := instance.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		orgs[cfg.OrganizationID] = true
		st, err := store.Open(filepath.Join(dir, instance.DatabaseFile))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := st.GetTransaction(context.Background(), txn)
		st.Close()
		if err != nil || tr.State != "completed" {
			t.Fatalf("%s holds %s in %q (%v), want completed", cfg.OrganizationID, txn, tr.State, err)
		}
	}
	if len(orgs) != 2 {
		t.Fatalf("both state directories are of %v", orgs)
	}
}

// lastEvent is the payload of a bundle's transaction event of the highest
// sequence.
func lastEvent(b *bundle.Bundle) map[string]any {
	var last map[string]any
	var top int64
	for _, o := range b.ObjectValues() {
		if o["object_type"] != "transaction_event" {
			continue
		}
		p, _ := o["payload"].(map[string]any)
		n, _ := p["sequence"].(json.Number).Int64()
		if n > top {
			top, last = n, p
		}
	}
	return last
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestReadmeBlocksRefuseUntestedSteps keeps the rule the README test
// rests on: a block the test would not run, or a section that is gone,
// is an error rather than a silent pass.
func TestReadmeBlocksRefuseUntestedSteps(t *testing.T) {
	good := "# t\n\n## Your own instance\n\ntext\n\n```sh\na\nb\n```\n\n```sh\nc\n```\n\n## Next\n\n```\nnot run\n```\n"
	blocks, err := readmeBlocks([]byte(good), readmeSection)
	if err != nil || !slices.Equal(blocks, []string{"a\nb\n", "c\n"}) {
		t.Fatalf("blocks %q, %v", blocks, err)
	}
	for name, doc := range map[string]string{
		"a plain block": "## Your own instance\n\n```\nparty serve\n```\n",
		"a json block":  "## Your own instance\n\n```sh\na\n```\n\n```json\n{}\n```\n",
		"no section":    "## Your instance\n\n```sh\na\n```\n",
		"no blocks":     "## Your own instance\n\ntext only\n",
		"unclosed":      "## Your own instance\n\n```sh\na\n",
	} {
		if _, err := readmeBlocks([]byte(doc), readmeSection); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
