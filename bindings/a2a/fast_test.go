package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/reason"
)

var fastObjects = [][]byte{[]byte(`{"id":"evd_1","transaction_id":"txn_0123456789abcdef01234567"}`), []byte(`{"id":"key_1","transaction_id":null}`)}

const fastTxn = "txn_0123456789abcdef01234567"

// viaA2AGo reads a message/send request body as a2a-go's server does:
// the JSON-RPC envelope, its params into a MessageSendParams, then
// readMessage.
func viaA2AGo(body []byte) (method string, txn string, objects [][]byte, err error) {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		ID      any             `json:"id"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		return "", "", nil, err
	}
	var params a2a.MessageSendParams
	if err := json.Unmarshal(req.Params, &params); err != nil {
		return req.Method, "", nil, err
	}
	if params.Message == nil {
		return req.Method, "", nil, errors.New("no message")
	}
	txn, objects, err = readMessage(params.Message)
	return req.Method, txn, objects, err
}

// The request party writes is the request a2a-go writes for the same
// message, read by a2a-go; and a2a-go's is read in one pass.
func TestOnePassRequestMatchesA2AGo(t *testing.T) {
	for _, txn := range []string{fastTxn, ""} {
		objs := fastObjects
		if txn == "" {
			objs = objs[1:]
		}
		body := encodeSend(txn, objs)
		method, gotTxn, got, err := viaA2AGo(body)
		if err != nil || method != "message/send" || gotTxn != txn || !slices.EqualFunc(got, objs, bytes.Equal) {
			t.Fatalf("a2a-go reads party's request as %s %q %q %v", method, gotTxn, got, err)
		}
		// And a2a-go's own encoding of the message newMessage builds.
		theirs, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "message/send", "id": "r-1",
			"params": &a2a.MessageSendParams{Message: newMessage(a2a.MessageRoleUser, txn, objs)}})
		if err != nil {
			t.Fatal(err)
		}
		req, gotTxn, got, err := fastSend(theirs)
		if err != nil || gotTxn != txn || !slices.EqualFunc(got, objs, bytes.Equal) || string(req.ID) != `"r-1"` {
			t.Fatalf("one pass reads a2a-go's request as %q %q %v", gotTxn, got, err)
		}
	}
}

// The response party writes is read by a2a-go's client as the Message
// a2a-go's server would have answered; a2a-go's response, an error and a
// Task result are read by party's client.
func TestOnePassResultMatchesA2AGo(t *testing.T) {
	body := encodeResult(json.RawMessage(`"r-1"`), fastTxn, fastObjects)
	var resp struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      any             `json:"id"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.JSONRPC != "2.0" || resp.ID != "r-1" {
		t.Fatalf("%s: %v", body, err)
	}
	event, err := a2a.UnmarshalEventJSON(resp.Result)
	msg, ok := event.(*a2a.Message)
	if err != nil || !ok || msg.Role != a2a.MessageRoleAgent {
		t.Fatalf("a2a-go reads the result as %T %v", event, err)
	}
	txn, got, err := readMessage(msg)
	if err != nil || txn != fastTxn || !slices.EqualFunc(got, fastObjects, bytes.Equal) {
		t.Fatalf("the result carries %q %q %v", txn, got, err)
	}
	for name, c := range map[string]struct {
		body    any
		objects [][]byte
		code    int
	}{
		"a2a-go's message": {map[string]any{"jsonrpc": "2.0", "id": "r-1", "result": newMessage(a2a.MessageRoleAgent, fastTxn, fastObjects)}, fastObjects, 0},
		"a task":           {map[string]any{"jsonrpc": "2.0", "id": "r-1", "result": taskWith(fastObjects)}, fastObjects, 0},
		"an error":         {map[string]any{"jsonrpc": "2.0", "id": "r-1", "error": map[string]any{"code": -32602, "message": "invalid params"}}, nil, -32602},
		"ours":             {json.RawMessage(body), fastObjects, 0},
	} {
		raw, err := json.Marshal(c.body)
		if err != nil {
			t.Fatal(err)
		}
		rpcErr, got, err := readResult(raw, fastTxn, "r-1")
		switch {
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case c.code != 0 && (rpcErr == nil || rpcErr.Code != c.code):
			t.Errorf("%s: error %+v", name, rpcErr)
		case c.code == 0 && (rpcErr != nil || !slices.EqualFunc(got, c.objects, bytes.Equal)):
			t.Errorf("%s: %v %q", name, rpcErr, got)
		}
	}
	// A reply correlated to another transaction is refused as readReply
	// refuses it.
	if _, _, err := readResult(encodeResult(json.RawMessage(`"r-1"`), "txn_ffffffffffffffffffffffff", fastObjects[1:]), fastTxn, "r-1"); !hasCode(err, reason.StreamMismatch) {
		t.Fatalf("a reply of another transaction: %v", err)
	}
	// A result answering another request, or none, is not this request's
	// reply, in either reader; an error need not name the request.
	for name, body := range map[string][]byte{
		"ours, another id":     encodeResult(json.RawMessage(`"r-2"`), fastTxn, fastObjects),
		"ours, a numeric id":   encodeResult(json.RawMessage(`1`), fastTxn, fastObjects),
		"ours, no id":          encodeResult(nil, fastTxn, fastObjects),
		"a2a-go's, another id": mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": "r-2", "result": taskWith(fastObjects)}),
	} {
		if _, got, err := readResult(body, fastTxn, "r-1"); err == nil {
			t.Errorf("%s: read as the reply, %d objects", name, len(got))
		}
	}
	if rpcErr, _, err := readResult(mustJSON(t, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "parse error"}}), fastTxn, "r-1"); err != nil || rpcErr == nil {
		t.Errorf("an error without the request's id: %v %v", rpcErr, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func taskWith(objects [][]byte) *a2a.Task {
	m := newMessage(a2a.MessageRoleAgent, fastTxn, objects)
	return &a2a.Task{ID: "t-1", ContextID: "c-1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}, Artifacts: []*a2a.Artifact{{ID: "a-1", Parts: m.Parts}}}
}

func hasCode(err error, c reason.Code) bool {
	var r *reason.Refusal
	return errors.As(err, &r) && r.Has(c)
}

// What is not the one shape goes to a2a-go; what is that shape but
// wrong is refused as readMessage refuses it.
func TestOnePassDeclinesOtherShapes(t *testing.T) {
	edit := func(f func(m map[string]any)) []byte {
		var req map[string]any
		if err := json.Unmarshal(encodeSend(fastTxn, fastObjects), &req); err != nil {
			t.Fatal(err)
		}
		f(req["params"].(map[string]any)["message"].(map[string]any))
		b, _ := json.Marshal(req)
		return b
	}
	part := func(m map[string]any) map[string]any { return m["parts"].([]any)[0].(map[string]any) }
	for name, body := range map[string][]byte{
		"a text part": edit(func(m map[string]any) {
			m["parts"] = append(m["parts"].([]any), map[string]any{"kind": "text", "text": "hello"})
		}),
		"a data part": edit(func(m map[string]any) {
			m["parts"] = append(m["parts"].([]any), map[string]any{"kind": "data", "data": map[string]any{}})
		}),
		"a context id": edit(func(m map[string]any) { m["contextId"] = "c-1" }),
		"a task id":    edit(func(m map[string]any) { m["taskId"] = "t-1" }),
		"a file by uri": edit(func(m map[string]any) {
			part(m)["file"] = map[string]any{"mimeType": delivery.MediaType, "uri": "https://x.invalid/o"}
		}),
		"part metadata":    edit(func(m map[string]any) { part(m)["metadata"] = map[string]any{"a": 1} }),
		"another kind":     edit(func(m map[string]any) { m["kind"] = "task" }),
		"another role":     edit(func(m map[string]any) { m["role"] = "system" }),
		"not JSON":         []byte(`{"jsonrpc":`),
		"trailing content": append(encodeSend(fastTxn, fastObjects), []byte(` {}`)...),
	} {
		if _, _, _, err := fastSend(body); !errors.Is(err, errNotFast) {
			t.Errorf("%s: read in one pass (%v)", name, err)
		}
	}
	for name, body := range map[string][]byte{
		"another media type": edit(func(m map[string]any) { part(m)["file"].(map[string]any)["mimeType"] = "application/json" }),
		"bytes not base64":   edit(func(m map[string]any) { part(m)["file"].(map[string]any)["bytes"] = "not base64!" }),
		"metadata not an object": edit(func(m map[string]any) {
			m["metadata"] = map[string]any{delivery.ExtensionURI: "txn"}
		}),
	} {
		_, _, _, err := fastSend(body)
		_, _, _, theirs := viaA2AGo(body)
		if err == nil || errors.Is(err, errNotFast) || theirs == nil {
			t.Errorf("%s: one pass %v, a2a-go %v; want both refusing", name, err, theirs)
		}
	}
}

// FuzzOnePassRequest: whatever the one-pass reader accepts, a2a-go's
// reads alike (the same transaction, the same objects); whatever it
// refuses (not declines), a2a-go's refuses too.
func FuzzOnePassRequest(f *testing.F) {
	f.Add(encodeSend(fastTxn, fastObjects))
	f.Add(encodeSend("", fastObjects[1:]))
	theirs, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "message/send", "id": 7,
		"params": &a2a.MessageSendParams{Message: newMessage(a2a.MessageRoleUser, fastTxn, fastObjects)}})
	f.Add(theirs)
	f.Add([]byte(`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","messageId":"m","parts":[{"kind":"file","file":{"mimeType":"` +
		delivery.MediaType + `","bytes":"` + base64.StdEncoding.EncodeToString([]byte("{}")) + `"}}],"role":"user"}},"id":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, txn, objects, err := fastSend(body)
		if errors.Is(err, errNotFast) {
			return
		}
		method, theirTxn, theirObjects, theirErr := viaA2AGo(body)
		if err != nil {
			if theirErr == nil {
				t.Fatalf("one pass refuses %s (%v), a2a-go takes it", body, err)
			}
			return
		}
		if theirErr != nil || method != "message/send" || theirTxn != txn || !slices.EqualFunc(objects, theirObjects, bytes.Equal) {
			t.Fatalf("one pass reads %s as %q %q, a2a-go as %s %q %q %v", body, txn, objects, method, theirTxn, theirObjects, theirErr)
		}
	})
}
