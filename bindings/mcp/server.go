// Package mcp exposes the agent's surface of a party instance (package
// agent) to the organisation's AI agent as MCP tools, over Streamable HTTP
// (with a bearer token) or stdio.
//
// It adapts and never decides: every rule lives in the packages it calls.
// What it owns is the wire: tool names, descriptions that tell a model when
// to call each tool and in what order, JSON Schemas for inputs and outputs,
// behaviour annotations, strict decoding of arguments, and the mapping of
// results and errors to MCP results, which happens in one place (result):
//
//   - success: structuredContent is the tool's output, and the same JSON is
//     the text content;
//   - a refusal (*reason.Refusal): isError, with structuredContent
//     {"outcome": "refused", "reason_codes": [...], "detail": ...} — nothing
//     was recorded, and the detail says what to do instead;
//   - any other failure, one of this instance's own (a disk full, an I/O
//     error, a database busy past its timeout): isError,
//     {"outcome": "error", "retryable": true, "detail": ...} — nothing was
//     decided against the act; the same call may be made again (with the
//     same request_id it returns the first result if one was recorded);
//   - an unknown tool or malformed request: a protocol error, from the SDK.
//
// With WithResources, every transaction is also a resource
// (party://transactions/{id}), as are the inbox and the transaction list;
// with WithApprovals, each of the agent's approval requests
// (party://approvals/{id}) and their list. A subscribed client is sent
// one notifications/resources/updated for each change of a resource's
// content: a commit, or the principal's decision in this process or
// another (resources.go).
//
// Write tools take an optional request_id. Repeating a call with the same
// request_id and arguments returns the first result and records nothing
// twice; the same request_id with other arguments is refused. Without a
// request_id nothing is derived from the arguments: the same arguments
// may rightly mean a second act (a second offer of the same terms, an
// assertion made again after a rejection, a proposal made again once the
// record moved), so only the tools whose repetition changes nothing say
// idempotentHint (the reads, and request_approval, which returns the
// pending request for the same act). destructiveHint marks the acts that
// pay, bind, give up or end (docs/record-protocol.md, "The tool
// contract").
//
// # The contract comes from the Go types
//
// A tool is one typed input struct and one handler:
//
//	Typed(Tool{Name: "settlement_status", Title: ..., Description: ..., ReadOnly: true},
//		func(ctx context.Context, in TransactionArgs) (SettlementsResult, error) { ... })
//
// NewServer infers both schemas from the handler's types with the SDK's
// schema library (github.com/google/jsonschema-go, what go-sdk's typed
// tools use): member names from the json tags, required members from the
// absence of omitempty, descriptions from the jsonschema tags, and
// additionalProperties false on every struct, so the schema a model reads
// and the decoder that refuses an unknown member are the same type. The
// input type is where the member is defined: an act's is the record
// engine's input (record.OfferInput, ...), a read tool's a small struct
// here ([TransactionArgs], [InboxArgs]). A record act is actTool(e, Tool{...},
// e.TheAct), which adds request_id, the write and open-world annotations
// and the engine's own idempotency.
//
// What a Go type cannot say is carried by a named type whose schema is
// written once, in typeSchemas (schema.go): a closed set of values
// (protocol.ResponseType, protocol.RejectionReason, their values taken
// from the lists the engine and the gate check against), a bound
// (readmodel.PageLimit, 1 to store.MaxPage), the shape of an open object
// (record.Terms: the registered profiles' own schemas, joined by
// schema.TermsSchema), a minimum count (record.Evidence). A new field of
// one of these types needs nothing more; a new kind of constraint is a new
// named type and one entry there.
//
// Every schema is single-typed: Go slices and pointers infer as
// ["null", X], and schemaFor makes them X, because party never sends null
// (an empty list is [], a member with no value is omitted) — output types
// must hold to that, which Results.Check checks on every result in the
// tests, the end-to-end run and the walkthrough.
//
// tools/list carries each tool's name, title, description, annotations and
// input schema, and stays under 40 KB: every agent holds it in its context.
// The result schemas are not in it (they were 28 KB alone) but in one
// resource, ResultsURI, for a client that validates results; a model
// reads each result as the JSON it is. testdata/contract.txtar pins the
// whole contract (initialize, tools/list, the result schemas, a refusal);
// a change to a tool's name, description, annotations or either schema
// fails TestContractGolden until the file is regenerated with -update and
// the diff reviewed.
//
// The handlers are registered with the SDK's untyped Server.AddTool, not
// its typed AddTool, on purpose: the typed path validates arguments
// against the schema before the handler runs, which would answer a bad
// value with a generic error where the engine answers with its registered
// A202 code (an empty evidence list is A202-OBLIGATION-ASSERTION-UNEVIDENCED,
// an unknown reason_code A202-OBLIGATION-REJECTION-REASON-UNKNOWN); it
// wraps a handler's error as text, where result gives a refusal its
// structured shape; and it would fail a recorded act's answer on an output
// mismatch after the fact. The schemas describe; the engine decides.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/partyd/party/internal/agent"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/store"
)

// Version is the server version reported to MCP clients.
const Version = "0.1.0"

// Instructions is what the server tells a connecting client about the call
// order.
const Instructions = `This server is your organisation's A202 instance. It signs, records and exchanges commercial objects with one counterparty organisation's instance on your behalf, and only within the mandates your principal issued to you.

Call order:
1. whoami: your organisation, your agent id and the mandates you hold.
2. verify_mandate for the exact act you intend to take. It answers allow, deny or require_approval, with the act's action_hash.
3. On require_approval: request_approval with the same arguments, poll approval_status until your principal decides, then verify_mandate again with the approval_id. You can ask for an approval; you can never give one. An act tool whose act your mandate holds files the request itself: its refusal names the approval_request_id; once approved, take the same act again.
4. Take the act with the tool for it. Every recording tool re-evaluates your mandate at that moment and refuses an act it does not allow. Its description ends with the act document it is evaluated as ("Act: action_type {proposed_terms; references}"), what verify_mandate takes. Give each act a request_id of your own: a retry with the same request_id and arguments returns the first result, while a repeated call without one acts again.
5. get_transaction_record and list_transactions show where transactions stand; verify_evidence checks a record.

A refusal is a result with outcome "refused" and registered A202 reason codes; it means nothing was recorded. Money, percentages and quantities are always base-10 strings, never numbers. The JSON Schema of every tool's result is the resource party://schemas/results.`

// Tool is one agent tool: what a model is told about it, and its handler,
// bound by Typed. A Tool that did not come from Typed has no handler and
// NewServer refuses it.
type Tool struct {
	Name        string
	Title       string
	Description string
	ReadOnly    bool
	// Idempotent: the same call again, request_id or not, changes nothing
	// more (idempotentHint). A write tool is not idempotent merely for
	// taking a request_id: a client that retries on the hint does not
	// know to send one.
	Idempotent bool
	// Destructive: the act moves money, binds the organisation, gives
	// something up or ends a deal, and cannot be undone by another tool
	// (destructiveHint, which clients use to ask the user first).
	Destructive bool
	OpenWorld   bool // reaches the counterparty's instance
	// Write tools accept request_id: the same request_id and arguments
	// return the first result.
	Write bool
	// OwnIdempotency marks a write tool whose act records its request_id
	// itself, in the act's own database transaction (the record engine's
	// acts): the tool reads the request from RequestOf and the generic
	// claim is skipped.
	OwnIdempotency bool

	in, out reflect.Type // the handler's input and output types
	run     func(ctx context.Context, args json.RawMessage) (any, error)
	// scope is the idempotency scope of the tool's request_ids (default
	// its name): an agent's own (NewAgentServer).
	scope string
}

func (t Tool) idemScope() string {
	if t.scope != "" {
		return t.scope
	}
	return t.Name
}

// NewAgentServer returns the MCP server of one of the instance's agents:
// tools (built over that agent's surface, agent.NewFor) run with the agent
// named as the one their calls reached (AgentOf), which the record tools
// turn into the engine's Actor for it, so every mandate they read or act
// under must be issued to it, and so do the resources' reads; its
// request_ids are its own.
func NewAgentServer(agentID string, tools []Tool, st *store.Store, logger *slog.Logger, opts ...Option) *sdk.Server {
	scoped := make([]Tool, len(tools))
	for i, t := range tools {
		run := t.run
		if run != nil {
			t.run = func(ctx context.Context, args json.RawMessage) (any, error) {
				return run(context.WithValue(ctx, agentKey{}, agentID), args)
			}
		}
		t.scope = agentID + "/" + t.Name
		scoped[i] = t
	}
	return NewServer(scoped, st, logger, append([]Option{forAgent(agentID)}, opts...)...)
}

// Typed returns t answering with run. The arguments are decoded strictly
// into In (a member In does not define is refused) and In's JSON Schema is
// the tool's input schema; Out's is its output schema. Both are inferred
// from the Go types by NewServer (schemaFor): member names from the json
// tags, required members from the absence of omitempty, descriptions from
// the jsonschema tags, value sets and bounds from typeSchemas.
func Typed[In, Out any](t Tool, run func(context.Context, In) (Out, error)) Tool {
	t.in, t.out = reflect.TypeFor[In](), reflect.TypeFor[Out]()
	t.run = func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in In
		if err := decode(raw, &in); err != nil {
			return nil, err
		}
		return run(ctx, in)
	}
	return t
}

// NoArgs is the input of a tool that takes no arguments.
type NoArgs struct{}

// NewServer returns an MCP server exposing tools; WithResources adds the
// record's resources and their notifications. It panics on a tool whose
// schemas cannot be inferred, as on any other programming error in the
// tool list: every test that builds a server finds it.
func NewServer(tools []Tool, st *store.Store, logger *slog.Logger, opts ...Option) *sdk.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	setup := &serverSetup{opts: &sdk.ServerOptions{Instructions: Instructions, Logger: logger}}
	for _, o := range opts {
		o(setup)
	}
	// After the options, which keep the full logger for party's own lines.
	setup.opts.Logger = sdkLogger(logger)
	s := sdk.NewServer(&sdk.Implementation{Name: "party", Title: "party: A202 instance", Version: Version}, setup.opts)
	for _, f := range setup.after {
		f(s)
	}
	results := map[string]*jsonschema.Schema{}
	for _, t := range tools {
		t := t
		if t.run == nil {
			panic(fmt.Sprintf("mcp: tool %s has no handler; build it with Typed", t.Name))
		}
		in, err := inputSchema(t.in, t.Write)
		if err != nil {
			panic(fmt.Sprintf("mcp: input schema of %s: %v", t.Name, err))
		}
		out, err := schemaFor(t.out)
		if err != nil {
			panic(fmt.Sprintf("mcp: output schema of %s: %v", t.Name, err))
		}
		results[t.Name] = out
		if t.ReadOnly && (t.Write || t.Destructive) {
			panic(fmt.Sprintf("mcp: tool %s is read-only and writes", t.Name))
		}
		open := t.OpenWorld
		var destructive *bool // meaningless for a read (the spec says so)
		if !t.ReadOnly {
			destructive = &t.Destructive
		}
		s.AddTool(&sdk.Tool{
			Name:        t.Name,
			Title:       t.Title,
			Description: t.Description,
			InputSchema: in,
			// Every meaningful hint is sent, none left to its default
			// (destructive and open-world default to true): a client
			// reads exactly what each tool does. The title is the
			// tool's own, not repeated here.
			Annotations: &sdk.ToolAnnotations{
				ReadOnlyHint:    t.ReadOnly,
				IdempotentHint:  t.Idempotent,
				OpenWorldHint:   &open,
				DestructiveHint: destructive,
			},
		}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			out, err := call(ctx, t, st, req.Params.Arguments)
			if err != nil {
				logger.Info("tool refused", "tool", t.Name, "codes", reason.CodesOf(err), "error", err)
			}
			return result(out, err), nil
		})
	}
	body, err := json.Marshal(results)
	if err != nil {
		panic(fmt.Sprintf("mcp: result schemas: %v", err))
	}
	s.AddResource(&sdk.Resource{URI: ResultsURI, Name: "results", Title: "What each tool returns", MIMEType: "application/json",
		Description: "The JSON Schema of each tool's structured result, by tool name, for a client that validates results (tools/list leaves them out)."},
		func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: ResultsURI, MIMEType: "application/json", Text: string(body)}}}, nil
		})
	return s
}

// ResultsURI is the resource holding the schema of every tool's result
// (structuredContent), by tool name. tools/list announces no
// outputSchema: the results' shapes are as large as everything else in
// it together (28 KB of 80 KB), a model reads each result as the JSON it
// is, and every client would carry them in its context on every
// connection; a client that validates results reads them here once.
const ResultsURI = "party://schemas/results"

// call decodes arguments strictly and runs the tool, through the
// idempotency record when the tool writes and a request_id is given.
func call(ctx context.Context, t Tool, st *store.Store, raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`) // a call without arguments
	}
	args, err := canonical.DecodeObject(raw)
	if err != nil {
		return nil, reason.Refuse("arguments: " + err.Error())
	}
	if !t.Write {
		return t.run(ctx, raw)
	}
	rid, _ := args["request_id"].(string)
	delete(args, "request_id")
	clean, err := canonical.Marshal(args)
	if err != nil {
		return nil, reason.Refuse("arguments: " + err.Error())
	}
	if rid == "" || st == nil {
		return t.run(ctx, clean)
	}
	if t.OwnIdempotency {
		return t.run(context.WithValue(ctx, requestKey{}, Request{Scope: t.idemScope(), ID: rid, ArgsHash: canonical.SHA256Hex(clean)}), clean)
	}
	prior, found, err := st.Claim(ctx, t.idemScope(), rid, canonical.SHA256Hex(clean))
	switch {
	case errors.Is(err, store.ErrRequestReused):
		return nil, reason.Refuse("request_id " + rid + " was already used with other arguments; choose a new request_id for a new request")
	case errors.Is(err, store.ErrRequestRunning):
		return nil, reason.Refuse("a call with request_id " + rid + " is still running or was interrupted; read the transaction record, then retry with a new request_id")
	case err != nil:
		return nil, err
	case found:
		var out any
		if err := json.Unmarshal(prior, &out); err != nil {
			return nil, err
		}
		return out, nil
	}
	out, err := t.run(ctx, clean)
	if err != nil {
		// A refused call recorded nothing; the id may be used again.
		_ = st.Release(ctx, t.idemScope(), rid)
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if err := st.Finish(ctx, t.idemScope(), rid, b); err != nil {
		return nil, err
	}
	return out, nil
}

// Request is an idempotent call's identity: the tool, the caller's
// request_id and the hash of its other arguments.
type Request struct {
	Scope, ID, ArgsHash string
}

type requestKey struct{}

type agentKey struct{}

// AgentOf returns the agent whose server (NewAgentServer) a tool call
// reached: request-scoped, like the caller's token; "" on a server that is
// no agent's, where every act is refused (record.Engine.Agent).
func AgentOf(ctx context.Context) string {
	a, _ := ctx.Value(agentKey{}).(string)
	return a
}

// RequestOf returns the request a tool with OwnIdempotency runs for (the
// zero Request when the caller gave no request_id).
func RequestOf(ctx context.Context) Request {
	r, _ := ctx.Value(requestKey{}).(Request)
	return r
}

// Refused is the structured content of a refusal.
type Refused struct {
	Outcome     string        `json:"outcome"`
	ReasonCodes []reason.Code `json:"reason_codes"`
	Detail      string        `json:"detail"`
	// Retryable says the call failed here, not on its merits: make it
	// again. A refusal is never retryable as it stands.
	Retryable bool `json:"retryable"`
	// ApprovalRequestID names the approval request an act held for your
	// principal's approval waits under: subscribe to its resource
	// (party://approvals/{id}) or poll approval_status with it.
	ApprovalRequestID string `json:"approval_request_id,omitempty"`
	// Budget names the budget of your organisation that stopped or held
	// the act, and what is left under it (never told to the
	// counterparty).
	Budget *reason.BudgetStanding `json:"budget,omitempty"`
}

// result maps a tool's output or error to an MCP result. It is the only
// place errors become wire shapes.
func result(out any, err error) *sdk.CallToolResult {
	if err != nil {
		var r *reason.Refusal
		payload := Refused{Outcome: "error", ReasonCodes: []reason.Code{}, Detail: err.Error(), Retryable: true}
		if errors.As(err, &r) {
			payload.Outcome, payload.Retryable = "refused", false
			payload.Detail = r.Detail
			payload.ApprovalRequestID = r.ApprovalRequestID
			payload.Budget = r.Budget
			if r.Codes != nil {
				payload.ReasonCodes = r.Codes
			}
		}
		b, _ := json.Marshal(payload)
		return &sdk.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
	}
	b, merr := json.Marshal(out)
	if merr != nil {
		return result(nil, merr)
	}
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}

// decode reads arguments into v, refusing members v does not define.
func decode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return reason.Refuse("arguments: " + err.Error())
	}
	return nil
}

// Handler serves the MCP Streamable HTTP endpoint at /mcp behind the agent
// token, and the protected-resource metadata beside it, both naming the
// URL the client used. adminToken is recognised only to answer 403: the
// principal's token opens nothing here.
func Handler(server *sdk.Server, agentToken, adminToken string) http.Handler {
	return AgentsHandler(map[string]*sdk.Server{agentToken: server}, adminToken)
}

// streamableOptions: a request's answer is one JSON body, not an SSE
// stream of one event. No tool sends a notification or a request of its
// own while it runs, so nothing is lost; the resources' notifications
// travel on the client's standalone stream (GET /mcp) as before. The
// stream's framing and its reading cost about a fiftieth of a formation's
// CPU across server and agents.
var streamableOptions = &sdk.StreamableHTTPOptions{JSONResponse: true}

// AgentsHandler serves the MCP endpoint of several agents at /mcp: the
// bearer token authenticates the agent, and its requests reach that
// agent's server alone (servers maps each agent's token to its server).
// adminToken is recognised only to answer 403.
func AgentsHandler(servers map[string]*sdk.Server, adminToken string) http.Handler {
	mux := http.NewServeMux()
	routes := map[string]http.Handler{}
	for tok, srv := range servers {
		srv := srv
		routes[tok] = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, streamableOptions)
	}
	mux.Handle("/mcp", RequireTokens(routes, adminToken, ""))
	// At the root and at the path-suffixed location RFC 9728 §3.1 derives
	// for the resource /mcp, which clients probe first.
	mux.Handle(ProtectedResourcePath, ProtectedResourceMetadata(""))
	mux.Handle(ProtectedResourcePath+"/mcp", ProtectedResourceMetadata(""))
	return mux
}

// AgentTools returns the tools over the agent's surface a.
func AgentTools(a *agent.Surface) []Tool {
	return agentTools(a)
}
