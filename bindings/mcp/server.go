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
//   - any other failure: isError, {"outcome": "error", "detail": ...};
//   - an unknown tool or malformed request: a protocol error, from the SDK.
//
// Write tools take an optional request_id. Repeating a call with the same
// request_id and arguments returns the first result and records nothing
// twice; the same request_id with other arguments is refused.
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
	"github.com/partyd/party/internal/org"
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
4. Take the act with the tool for it. Every recording tool re-evaluates your mandate at that moment and refuses an act it does not allow.
5. get_transaction_record and list_transactions show where transactions stand; verify_evidence checks a record.

A refusal is a result with outcome "refused" and registered A202 reason codes; it means nothing was recorded. Money, percentages and quantities are always base-10 strings, never numbers.`

// Tool is one agent tool.
type Tool struct {
	Name        string
	Title       string
	Description string
	Input       map[string]any // JSON Schema of the arguments
	OutputType  reflect.Type   // Go type whose schema is the output schema
	ReadOnly    bool
	Idempotent  bool
	OpenWorld   bool // reaches the counterparty's instance
	// Write tools accept request_id and are made idempotent by it.
	Write bool
	// OwnIdempotency marks a write tool whose act records its request_id
	// itself, in the act's own database transaction (the record engine's
	// acts): the tool reads the request from RequestOf and the generic
	// claim is skipped.
	OwnIdempotency bool
	Run            func(ctx context.Context, args json.RawMessage) (any, error)
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
// named as the one their calls act for (org.WithAgent), so every mandate
// they read or act under must be issued to it; its request_ids are its
// own.
func NewAgentServer(agentID string, tools []Tool, st *store.Store, logger *slog.Logger) *sdk.Server {
	scoped := make([]Tool, len(tools))
	for i, t := range tools {
		run := t.Run
		t.Run = func(ctx context.Context, args json.RawMessage) (any, error) {
			return run(org.WithAgent(ctx, agentID), args)
		}
		t.scope = agentID + "/" + t.Name
		scoped[i] = t
	}
	return NewServer(scoped, st, logger)
}

// NewServer returns an MCP server exposing tools.
func NewServer(tools []Tool, st *store.Store, logger *slog.Logger) *sdk.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "party", Title: "party: A202 instance", Version: Version},
		&sdk.ServerOptions{Instructions: Instructions, Logger: logger})
	for _, t := range tools {
		t := t
		out, err := jsonschema.ForType(t.OutputType, &jsonschema.ForOptions{})
		if err != nil {
			panic(fmt.Sprintf("mcp: output schema of %s: %v", t.Name, err))
		}
		in := t.Input
		if t.Write {
			in = withRequestID(in)
		}
		open := t.OpenWorld
		s.AddTool(&sdk.Tool{
			Name:         t.Name,
			Title:        t.Title,
			Description:  t.Description,
			InputSchema:  in,
			OutputSchema: out,
			Annotations: &sdk.ToolAnnotations{
				Title:           t.Title,
				ReadOnlyHint:    t.ReadOnly,
				IdempotentHint:  t.Idempotent || t.Write,
				OpenWorldHint:   &open,
				DestructiveHint: boolPtr(false),
			},
		}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			out, err := call(ctx, t, st, req.Params.Arguments)
			if err != nil {
				logger.Info("tool refused", "tool", t.Name, "codes", reason.CodesOf(err), "error", err)
			}
			return result(out, err), nil
		})
	}
	return s
}

func boolPtr(b bool) *bool { return &b }

func withRequestID(in map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range in {
		out[k] = v
	}
	props := map[string]any{}
	if p, ok := in["properties"].(map[string]any); ok {
		for k, v := range p {
			props[k] = v
		}
	}
	props["request_id"] = map[string]any{
		"type":        "string",
		"minLength":   1,
		"maxLength":   128,
		"description": "Optional id you choose for this call. Repeating the call with the same request_id and arguments returns the first result and records nothing twice; reusing it with other arguments is refused.",
	}
	out["properties"] = props
	return out
}

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
		return t.Run(ctx, raw)
	}
	rid, _ := args["request_id"].(string)
	delete(args, "request_id")
	clean, err := canonical.Marshal(args)
	if err != nil {
		return nil, reason.Refuse("arguments: " + err.Error())
	}
	if rid == "" || st == nil {
		return t.Run(ctx, clean)
	}
	scope := t.idemScope()
	if t.OwnIdempotency {
		return t.Run(context.WithValue(ctx, requestKey{}, Request{Scope: scope, ID: rid, ArgsHash: canonical.SHA256Hex(clean)}), clean)
	}
	prior, found, err := st.Claim(ctx, scope, rid, canonical.SHA256Hex(clean))
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
	out, err := t.Run(ctx, clean)
	if err != nil {
		// A refused call recorded nothing; the id may be used again.
		_ = st.Release(ctx, scope, rid)
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if err := st.Finish(ctx, scope, rid, b); err != nil {
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
	// ApprovalRequestID names the approval request an act held for your
	// principal's approval waits under: poll approval_status with it.
	ApprovalRequestID string `json:"approval_request_id,omitempty"`
}

// result maps a tool's output or error to an MCP result. It is the only
// place errors become wire shapes.
func result(out any, err error) *sdk.CallToolResult {
	if err != nil {
		var r *reason.Refusal
		payload := Refused{Outcome: "error", ReasonCodes: []reason.Code{}, Detail: err.Error()}
		if errors.As(err, &r) {
			payload.Outcome = "refused"
			payload.Detail = r.Detail
			payload.ApprovalRequestID = r.ApprovalRequestID
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

// AgentsHandler serves the MCP endpoint of several agents at /mcp: the
// bearer token authenticates the agent, and its requests reach that
// agent's server alone (servers maps each agent's token to its server).
// adminToken is recognised only to answer 403.
func AgentsHandler(servers map[string]*sdk.Server, adminToken string) http.Handler {
	mux := http.NewServeMux()
	routes := map[string]http.Handler{}
	for tok, srv := range servers {
		srv := srv
		routes[tok] = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{})
	}
	mux.Handle("/mcp", RequireTokens(routes, adminToken, ""))
	mux.Handle(ProtectedResourcePath, ProtectedResourceMetadata(""))
	return mux
}

// ServeStdio runs server over standard input and output until ctx ends or
// the client disconnects.
func ServeStdio(ctx context.Context, server *sdk.Server) error {
	return server.Run(ctx, &sdk.StdioTransport{})
}

// AgentTools returns the tools over the agent's surface a.
func AgentTools(a *agent.Surface) []Tool {
	return agentTools(a)
}
