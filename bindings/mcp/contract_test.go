package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/partyd/party/bindings/mcp"
	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/orgtest"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/contract.txtar from what the server says now")

// servedTools are the tools `party serve` exposes (daemon: the agent's
// surface and verify_evidence, then the record engine's tools).
func servedTools(n *orgtest.Node, e *record.Engine) []mcp.Tool {
	tools := append(mcp.AgentTools(agent.New(n.Org)), mcp.VerifyTools(n.Org.Store)...)
	return append(tools, mcp.RecordTools(e)...)
}

// contractExchange is the golden conversation: what a client sends and
// what the server answers, one JSON-RPC message per step, over the stdio
// framing `party mcp` presents.
var contractExchange = []struct {
	name, send string
	reply      bool
}{
	{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"contract-test","version":"0"}}}`, true},
	{"initialized", `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`, false},
	{"tools-list", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`, true},
	{"results", `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"party://schemas/results"}}`, true},
	{"refusal", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"accept_offer","arguments":{"mandate_id":"mnd_000000000000000000000000","offer_id":"off_000000000000000000000000"}}}`, true},
}

// maxToolsList bounds the tools/list reply, as the server sends it: a
// client hands all of it (names, descriptions, annotations, both schemas
// of every tool) to its model before the first call.
const maxToolsList = 40_000

// volatile are the parts of a message that differ between runs, and what
// stands for them in the golden file.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\bkey_[0-9a-f]{24}\b`), "<key_id>"},
}

func normalise(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		return b
	}
	s := out.Bytes()
	for _, v := range volatile {
		s = v.re.ReplaceAll(s, []byte(v.with))
	}
	return append(s, '\n')
}

// TestContractGolden pins the model-facing contract: the initialize
// answer (server, version, instructions, capabilities), tools/list (every
// tool's name, title, description, annotations and input schema), every
// tool's result schema (mcp.ResultsURI) and the
// wire shape of a refusal, and holds tools/list within maxToolsList
// bytes. Any change to any of them fails here; when the
// change is meant, rewrite the file with
//
//	go test ./bindings/mcp -run TestContractGolden -update
//
// and review the diff like code.
func TestContractGolden(t *testing.T) {
	t.Parallel()
	n := orgtest.New(t, "org_delta", nil, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// As the daemon builds it: the served tools, the record's resources
	// and the agent's approvals (which add to the instructions and the
	// capabilities).
	e := record.New(record.Of(n.Org), record.Options{})
	srv := mcp.NewAgentServer(n.Org.Config().AgentID, servedTools(n, e), n.Org.Store, nil, mcp.WithResources(ctx, e), mcp.WithApprovals(ctx, agent.New(n.Org)))

	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	ss, err := srv.Connect(ctx, &sdk.IOTransport{Reader: toServer, Writer: fromServer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	replies := bufio.NewReader(clientIn)
	var toolsList int // bytes of the tools/list reply as sent

	ar := &txtar.Archive{Comment: []byte("The MCP contract of party's agent tools: an initialize exchange, tools/list, the result schemas\n" +
		"(party://schemas/results, its text) and one refusal, as the server sends them (indented; times and key ids normalised).\n" +
		"Regenerate: go test ./bindings/mcp -run TestContractGolden -update\n")}
	for _, step := range contractExchange {
		if _, err := io.WriteString(clientOut, step.send+"\n"); err != nil {
			t.Fatal(err)
		}
		ar.Files = append(ar.Files, txtar.File{Name: step.name + ".send", Data: normalise([]byte(step.send))})
		if !step.reply {
			continue
		}
		line, err := replies.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		switch step.name {
		case "tools-list":
			toolsList = len(line)
		case "results":
			// The schemas travel as the resource's text: pinned as the
			// JSON they are, not as one escaped string.
			var r struct {
				Result sdk.ReadResourceResult `json:"result"`
			}
			if err := json.Unmarshal(line, &r); err != nil || len(r.Result.Contents) != 1 {
				t.Fatalf("results: %v %s", err, line)
			}
			line = []byte(r.Result.Contents[0].Text)
		}
		ar.Files = append(ar.Files, txtar.File{Name: step.name + ".reply", Data: normalise(line)})
	}
	got := txtar.Format(ar)
	if toolsList > maxToolsList {
		t.Errorf("tools/list is %d bytes, more than %d: every agent carries it in its context", toolsList, maxToolsList)
	}

	path := filepath.Join("testdata", "contract.txtar")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the MCP contract changed; if that is meant, rerun with -update and review the diff\n%s", firstDifference(want, got))
	}
}

// firstDifference names the section and line where got first departs
// from want.
func firstDifference(want, got []byte) string {
	w, g := txtar.Parse(want), txtar.Parse(got)
	files := map[string][]byte{}
	for _, f := range w.Files {
		files[f.Name] = f.Data
	}
	for _, f := range g.Files {
		old, ok := files[f.Name]
		if !ok {
			return "new section " + f.Name
		}
		delete(files, f.Name)
		if bytes.Equal(old, f.Data) {
			continue
		}
		ol, nl := strings.Split(string(old), "\n"), strings.Split(string(f.Data), "\n")
		for i := 0; i < len(ol) || i < len(nl); i++ {
			var o, n string
			if i < len(ol) {
				o = ol[i]
			}
			if i < len(nl) {
				n = nl[i]
			}
			if o != n {
				return fmt.Sprintf("%s line %d:\n- %s\n+ %s", f.Name, i+1, o, n)
			}
		}
	}
	for name := range files {
		return "section " + name + " is gone"
	}
	return "the comment differs"
}

// TestSchemasSingleTyped walks every served tool's schemas (input, and
// result from mcp.ResultsURI) as a client receives them: no type is a list (["null", "array"] and the like), so a
// client that maps tool schemas onto a single-type dialect reads them as
// they are; and every member a model can send is described.
func TestSchemasSingleTyped(t *testing.T) {
	t.Parallel()
	n := orgtest.New(t, "org_delta", nil, false)
	cs := connect(t, mcp.NewAgentServer(n.Org.Config().AgentID, servedTools(n, record.New(record.Of(n.Org), record.Options{})), n.Org.Store, nil))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) < 17 {
		t.Fatalf("%d tools listed", len(res.Tools))
	}
	var outs map[string]any
	if err := json.Unmarshal([]byte(readResultSchemas(t, cs)), &outs); err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		var in any
		remarshal(t, tl.InputSchema, &in)
		out, ok := outs[tl.Name].(map[string]any)
		if !ok {
			t.Fatalf("%s has no result schema", tl.Name)
		}
		for _, s := range []struct {
			which string
			v     any
		}{{"input", in}, {"output", out}} {
			walkJSON(s.v, "", func(at string, m map[string]any) {
				switch ty := m["type"].(type) {
				case string:
					if ty == "null" {
						t.Errorf("%s %s schema at %q: type null", tl.Name, s.which, at)
					}
				case nil:
				default:
					t.Errorf("%s %s schema at %q: type %v is not one type", tl.Name, s.which, at, ty)
				}
			})
		}
		if in.(map[string]any)["type"] != "object" || out["type"] != "object" {
			t.Errorf("%s: schemas are not objects", tl.Name)
		}
		for name, p := range in.(map[string]any)["properties"].(map[string]any) {
			if name == "terms" {
				// The registered schemas' own shape, descriptions cut to
				// what they say (schema.TermsSchema); TestTermsSchema
				// holds it to the gate.
				if d, _ := p.(map[string]any)["description"].(string); d == "" {
					t.Errorf("%s: argument terms has no description", tl.Name)
				}
				continue
			}
			walkJSON(p, name, func(at string, m map[string]any) {
				if props, ok := m["properties"].(map[string]any); ok {
					for k, v := range props {
						if d, _ := v.(map[string]any)["description"].(string); d == "" {
							t.Errorf("%s: argument %s/%s has no description", tl.Name, at, k)
						}
					}
				}
			})
			if d, _ := p.(map[string]any)["description"].(string); d == "" {
				t.Errorf("%s: argument %s has no description", tl.Name, name)
			}
		}
	}
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		t.Fatal(err)
	}
}

// walkJSON calls f on every object inside v, with its JSON pointer.
func walkJSON(v any, at string, f func(at string, m map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(at, x)
		for k, e := range x {
			walkJSON(e, at+"/"+k, f)
		}
	case []any:
		for i, e := range x {
			walkJSON(e, fmt.Sprintf("%s/%d", at, i), f)
		}
	}
}

// TestEmptyListsAreArrays calls every read tool where its lists are
// empty, on a fresh instance and on a committed transaction between two
// instances, and checks that each list is [] (callJSON checks every
// result against its output schema and for null anywhere).
func TestEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	emptyList := func(t *testing.T, tool string, out map[string]any, members ...string) {
		t.Helper()
		for _, m := range members {
			if l, ok := out[m].([]any); !ok || len(l) != 0 {
				t.Errorf("%s: %s is %#v, want []", tool, m, out[m])
			}
		}
	}

	t.Run("fresh instance", func(t *testing.T) {
		t.Parallel()
		n := orgtest.New(t, "org_delta", nil, false)
		cs := connect(t, mcp.NewAgentServer(n.Org.Config().AgentID, servedTools(n, record.New(record.Of(n.Org), record.Options{})), n.Org.Store, nil))
		out, _ := callJSON(t, cs, "whoami", map[string]any{})
		emptyList(t, "whoami", out, "mandates", "counterparties")
		out, _ = callJSON(t, cs, "list_inbox", map[string]any{})
		emptyList(t, "list_inbox", out, "offers")
		out, _ = callJSON(t, cs, "list_transactions", map[string]any{"limit": 5})
		emptyList(t, "list_transactions", out, "transactions")
		if _, ok := out["next_cursor"]; ok {
			t.Errorf("list_transactions: an empty page has a next_cursor: %v", out)
		}
	})

	t.Run("committed transaction", func(t *testing.T) {
		t.Parallel()
		b, s, _ := recordtest.Pair(t)
		txn := recordtest.Form(t, b, s, "1200.00")
		bcs := connect(t, mcp.NewAgentServer(b.Node.Org.Config().AgentID, servedTools(b.Node, b.Engine), b.Node.Org.Store, nil))
		scs := connect(t, mcp.NewAgentServer(s.Node.Org.Config().AgentID, servedTools(s.Node, s.Engine), s.Node.Org.Store, nil))

		out, _ := callJSON(t, bcs, "get_transaction_record", map[string]any{"transaction_id": txn})
		if out["state"] != "committed" || len(out["events"].([]any)) != 2 {
			t.Fatalf("record: %v", out)
		}
		emptyList(t, "get_transaction_record", out, "obligations", "forks")
		out, _ = callJSON(t, bcs, "settlement_status", map[string]any{"transaction_id": txn})
		emptyList(t, "settlement_status", out, "settlements")
		out, _ = callJSON(t, bcs, "list_inbox", map[string]any{"mandate_id": b.Mandate})
		emptyList(t, "list_inbox", out, "offers")
		out, isErr := callJSON(t, bcs, "verify_evidence", map[string]any{"transaction_id": txn})
		if isErr {
			t.Fatalf("verify_evidence: %v", out)
		}
		emptyList(t, "verify_evidence", out, "raised")

		// An act through the tools, and the offer it leaves in the
		// buyer's inbox, conform too.
		out, isErr = callJSON(t, scs, "propose_offer", map[string]any{
			"mandate_id": s.Mandate, "counterparty_organization_id": "org_northstar", "terms": recordtest.Terms("900.00"),
			"valid_until": envelope.Timestamp(time.Now().UTC().Add(time.Hour)), "request_id": "offer-1",
		})
		if isErr || out["status"] != "delivered" {
			t.Fatalf("propose_offer: %v", out)
		}
		out, _ = callJSON(t, bcs, "list_inbox", map[string]any{"mandate_id": b.Mandate})
		if offers := out["offers"].([]any); len(offers) != 1 || offers[0].(map[string]any)["acceptance_act"] == nil {
			t.Fatalf("inbox: %v", out)
		}
	})
}
