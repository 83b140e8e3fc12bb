package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/instance"
)

func init() {
	register("call", "call one of the agent's MCP tools on the running serve, as the agent, and print its result", runCall)
}

const callUsage = `Usage: party call --dir DIR [--agent AGENT_ID] [--get PATH] TOOL [ARG]...

Calls one MCP tool of the running 'party serve' of DIR, as its agent: an
MCP client over Streamable HTTP to config.json's mcp_addr, with the agent
token in DIR/tokens/agent (with --agent, that further agent's token), the
same endpoint and tools an AI agent uses. It is for trying the tools by
hand and for scripts; the act is checked and recorded exactly as an
agent's would be.

The tool's arguments are built from the ARGs, in order, later ones
overriding earlier ones:

  NAME=TEXT     the member NAME, a string
  NAME:=JSON    the member NAME, any JSON value (a number, an object...)
  {...}         a JSON object's members
  @FILE         the members of the JSON object in FILE
  -             the members of the JSON object on standard input

The result's structured content is printed on standard output as
indented JSON; with --get PATH only the value at PATH, a dotted path of
member names and array indexes (objects.obligation, offers.0.offer_id),
printed bare when it is a string. A refusal (or the instance's own
failure) is printed on standard error and nothing on standard output.

Exit status: 0 when the tool answered with a result; 1 when it refused,
failed, is unknown, PATH is not in the result, or serve cannot be
reached; 2 on a usage error.
`

func runCall(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party call", callUsage)
	dir := c.dirFlag()
	agentID := c.String("agent", "", "call as this agent of the instance (default its primary agent)")
	get := c.String("get", "", "print only the value at this dotted PATH of the result")
	pos, code, done := c.parseDir(args, dir, stdout, stderr)
	if done {
		return code
	}
	if len(pos) == 0 {
		return c.usageError(stderr, "no TOOL named")
	}
	tool := pos[0]
	toolArgs, err := callArguments(pos[1:], stdin)
	if err != nil {
		return c.usageError(stderr, "%v", err)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "party call: %s\n", fmt.Sprintf(format, a...))
		return 1
	}
	cfg, err := instance.LoadConfig(*dir)
	if err != nil {
		return fail("%v", err)
	}
	tokenFile := instance.AgentTokenFile
	if *agentID != "" {
		if _, known := cfg.KeyOf(*agentID); !known {
			return fail("%s is not an active agent of this instance", *agentID)
		}
		tokenFile = cfg.AgentTokenPath(*agentID)
	}
	token, err := instance.LoadToken(*dir, tokenFile)
	if err != nil {
		return fail("reading the agent token: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr := loopback(cfg.MCPAddr)
	// The SDK's connection error does not keep its cause, so whether serve
	// is there at all is asked first, to say so plainly.
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return fail("party serve is not running: nothing answers at %s (mcp_addr); start it with: party serve --dir %s", addr, *dir)
	}
	conn.Close()
	client := sdk.NewClient(&sdk.Implementation{Name: "party-call", Version: "0.1"}, nil)
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearerToken(token)},
		// One call and done: nothing to listen for between requests.
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fail("connecting to %s: %v", addr, err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: toolArgs})
	if err != nil {
		return fail("%s: %v", tool, err)
	}
	result := res.StructuredContent
	if result == nil {
		// A tool without structured output: its text, as it came.
		var texts []string
		for _, ct := range res.Content {
			if t, ok := ct.(*sdk.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		result = strings.Join(texts, "\n")
	}
	if res.IsError {
		// "refused" (the act was not allowed) or "error" (the instance's
		// own failure, worth retrying), as the result says.
		outcome := "failed"
		if m, ok := result.(map[string]any); ok {
			if o, ok := m["outcome"].(string); ok && o != "" {
				outcome = o
			}
		}
		fmt.Fprintf(stderr, "party call: %s %s:\n%s", tool, outcome, indentJSON(result))
		return 1
	}
	if *get != "" {
		v, ok := lookupPath(result, *get)
		if !ok {
			fmt.Fprintf(stderr, "party call: %s's result has no %s:\n%s", tool, *get, indentJSON(result))
			return 1
		}
		if s, isString := v.(string); isString {
			fmt.Fprintln(stdout, s)
		} else {
			fmt.Fprint(stdout, indentJSON(v))
		}
		return 0
	}
	fmt.Fprint(stdout, indentJSON(result))
	return 0
}

// callArguments builds a tool's arguments from party call's ARGs.
// Numbers keep their exact text (json.Number): amounts and quantities are
// strings in A202, but a limit or a count passed as JSON must not be
// rounded through a float on the way.
func callArguments(args []string, stdin io.Reader) (map[string]any, error) {
	out := map[string]any{}
	object := func(what string, data []byte) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil || m == nil {
			return fmt.Errorf("%s is not a JSON object: %v", what, err)
		}
		if dec.More() {
			return fmt.Errorf("%s holds more than one JSON value", what)
		}
		for k, v := range m {
			out[k] = v
		}
		return nil
	}
	for _, a := range args {
		var err error
		switch {
		case a == "-":
			var data []byte
			if data, err = io.ReadAll(stdin); err == nil {
				err = object("standard input", data)
			}
		case strings.HasPrefix(a, "@"):
			var data []byte
			if data, err = os.ReadFile(a[1:]); err == nil {
				err = object(a[1:], data)
			}
		case strings.HasPrefix(a, "{"):
			err = object("argument "+strconv.Quote(a), []byte(a))
		default:
			name, value, isJSON := strings.Cut(a, ":=")
			if !isJSON {
				var isText bool
				if name, value, isText = strings.Cut(a, "="); !isText {
					return nil, fmt.Errorf("argument %q is none of NAME=TEXT, NAME:=JSON, {...}, @FILE or -", a)
				}
			}
			if name == "" {
				return nil, fmt.Errorf("argument %q names no member", a)
			}
			if !isJSON {
				out[name] = value
				continue
			}
			dec := json.NewDecoder(strings.NewReader(value))
			dec.UseNumber()
			var v any
			if err = dec.Decode(&v); err != nil || dec.More() {
				return nil, fmt.Errorf("argument %s:= is not one JSON value: %q", name, value)
			}
			out[name] = v
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// lookupPath follows a dotted path of member names and array indexes.
func lookupPath(v any, path string) (any, bool) {
	for _, step := range strings.Split(path, ".") {
		switch n := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = n[step]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			v = n[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// indentJSON renders v for a person, without HTML escaping ("<" in a
// description stays "<"); text is written as it is.
func indentJSON(v any) string {
	if s, ok := v.(string); ok {
		return strings.TrimSuffix(s, "\n") + "\n"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v\n", v)
	}
	return b.String()
}

// bearerToken sends the agent token on every request to the MCP endpoint.
type bearerToken string

func (t bearerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}
