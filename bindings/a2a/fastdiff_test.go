package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// The one-pass reader against a2a-go's own reading of the same bytes.
//
// For a message/send body, fastSend either declines (errNotFast: a2a-go
// reads it) or yields what a2a-go's JSON-RPC server decodes from it,
// member for member: the JSON-RPC version, method and id (as the value
// echoed), the message's id, role, extensions, metadata (every key, as
// any), its parts (file parts with bytes: media type, name, base64), and
// nothing a2a-go would hold that the one pass drops (context or task id,
// referenced tasks, part metadata, send configuration, params metadata);
// and then the same correlation id and objects readMessage takes from
// a2a-go's Message. A body the one pass refuses, a2a-go's path refuses.

// a2aGoRequest is a body as a2a-go's JSON-RPC server reads it
// (a2asrv's jsonrpcHandler: the envelope with params raw and the id as
// any, then params into MessageSendParams), after the envelope read the
// endpoint does first (serveEndpoint's json.Unmarshal of rpcEnvelope).
type a2aGoRequest struct {
	JSONRPC string
	Method  string
	ID      any
	Params  a2a.MessageSendParams
}

func readAsA2AGo(body []byte) (*a2aGoRequest, error) {
	var env rpcEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, err
	}
	var payload struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
		ID      any             `json:"id"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&payload); err != nil {
		return nil, err
	}
	if payload.JSONRPC != "2.0" {
		return nil, errors.New("not JSON-RPC 2.0")
	}
	r := &a2aGoRequest{JSONRPC: payload.JSONRPC, Method: payload.Method, ID: payload.ID}
	if err := json.Unmarshal(payload.Params, &r.Params); err != nil {
		return nil, err
	}
	return r, nil
}

// sameAsA2AGo checks fastSend's reading of body against a2a-go's and
// returns false when fastSend declined.
func sameAsA2AGo(t *testing.T, body []byte) (read bool) {
	t.Helper()
	req, txn, objects, err := fastSend(body)
	if errors.Is(err, errNotFast) {
		return false
	}
	theirs, theirErr := readAsA2AGo(body)
	var theirTxn string
	var theirObjects [][]byte
	if theirErr == nil {
		if theirs.Params.Message == nil {
			theirErr = errors.New("no message")
		} else {
			theirTxn, theirObjects, theirErr = readMessage(theirs.Params.Message)
		}
	}
	if err != nil {
		if theirErr == nil {
			t.Fatalf("one pass refuses %s (%v), a2a-go reads it", body, err)
		}
		return true
	}
	if theirErr != nil {
		t.Fatalf("one pass reads %s, a2a-go refuses it: %v", body, theirErr)
	}
	if d := diffA2AGo(req, theirs); d != "" {
		t.Fatalf("one pass and a2a-go read %s differently: %s", body, d)
	}
	if txn != theirTxn || !slices.EqualFunc(objects, theirObjects, bytes.Equal) {
		t.Fatalf("one pass takes %q %q from %s, readMessage %q %q", txn, objects, body, theirTxn, theirObjects)
	}
	return true
}

// diffA2AGo names the first member where the one pass's request differs
// from a2a-go's, "" when none does.
func diffA2AGo(req wireRequest, theirs *a2aGoRequest) string {
	m, tm := req.Params.Message, theirs.Params.Message
	var id any
	if len(req.ID) > 0 {
		if err := json.Unmarshal(req.ID, &id); err != nil {
			return "id: " + err.Error()
		}
	}
	echoed, _ := json.Marshal(theirs.ID)
	switch {
	case req.JSONRPC != theirs.JSONRPC || req.Method != theirs.Method:
		return fmt.Sprintf("envelope %q %q against %q %q", req.JSONRPC, req.Method, theirs.JSONRPC, theirs.Method)
	case !reflect.DeepEqual(id, theirs.ID):
		return fmt.Sprintf("id %s against %#v", req.ID, theirs.ID)
	case len(req.ID) > 0 && req.ID[0] != '"' && !bytes.Equal(req.ID, echoed):
		return fmt.Sprintf("id echoed %s, a2a-go echoes %s", req.ID, echoed)
	case theirs.Params.Config != nil || theirs.Params.Metadata != nil:
		return "a2a-go holds send configuration or params metadata the one pass dropped"
	case m.MessageID != tm.ID || m.Role != string(tm.Role):
		return fmt.Sprintf("message id/role %q %q against %q %q", m.MessageID, m.Role, tm.ID, tm.Role)
	case tm.ContextID != "" || tm.TaskID != "" || len(tm.ReferenceTasks) > 0:
		return "a2a-go holds a context, task or referenced task the one pass dropped"
	case !slices.Equal(m.Extensions, tm.Extensions) || (m.Extensions == nil) != (tm.Extensions == nil):
		return fmt.Sprintf("extensions %q against %q", m.Extensions, tm.Extensions)
	case (m.Metadata == nil) != (tm.Metadata == nil) || len(m.Metadata) != len(tm.Metadata):
		return fmt.Sprintf("metadata keys %v against %v", slices.Sorted(maps.Keys(m.Metadata)), slices.Sorted(maps.Keys(tm.Metadata)))
	case len(m.Parts) != len(tm.Parts):
		return fmt.Sprintf("%d parts against %d", len(m.Parts), len(tm.Parts))
	}
	for k, raw := range m.Metadata {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "metadata " + k + ": " + err.Error()
		}
		if tv, ok := tm.Metadata[k]; !ok || !reflect.DeepEqual(v, tv) {
			return fmt.Sprintf("metadata %q: %s against %#v", k, raw, tv)
		}
	}
	for i, p := range m.Parts {
		fp, ok := tm.Parts[i].(a2a.FilePart)
		if !ok {
			return fmt.Sprintf("part %d: a2a-go reads a %T", i, tm.Parts[i])
		}
		fb, ok := fp.File.(a2a.FileBytes)
		if p.Kind != "file" || p.File == nil || !ok || fp.Metadata != nil ||
			fb.MimeType != p.File.MimeType || fb.Name != p.File.Name || fb.Bytes != p.File.Bytes {
			return fmt.Sprintf("part %d: %+v against %#v", i, p, tm.Parts[i])
		}
	}
	return ""
}

// requestSeeds are message/send bodies as party's client writes them
// (encodeSend, what Client.Deliver posts) for the real objects of the
// two-party walkthrough's record (internal/verify/testdata), one, two and
// three to a message, with and without a transaction; and the same
// messages as a2a-go writes them.
func requestSeeds(t testing.TB) [][]byte {
	t.Helper()
	dir := filepath.Join("..", "..", "internal", "verify", "testdata", "two-party", "northstar", "objects")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) < 6 {
		t.Fatalf("the walkthrough's objects at %s: %d files, %v", dir, len(files), err)
	}
	var objects [][]byte
	for _, f := range files[:6] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, bytes.TrimSpace(b))
	}
	var out [][]byte
	for _, c := range []struct {
		txn  string
		objs [][]byte
	}{
		{fastTxn, objects[:1]}, {fastTxn, objects[1:3]}, {"", objects[3:6]}, {fastTxn, nil},
	} {
		out = append(out, encodeSend(c.txn, c.objs))
		theirs, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "message/send", "id": "r-1",
			"params": &a2a.MessageSendParams{Message: newMessage(a2a.MessageRoleUser, c.txn, c.objs)}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, theirs)
	}
	return out
}

// jsonMutations returns body's JSON with one change each: every member
// removed, set to null, to a number, a string, an empty object, an empty
// array; each of extraMembers in every object; the id as every kind of JSON
// value. Marshalled afresh, they reach the one pass in another layout
// than the template's.
func jsonMutations(t testing.TB, body []byte) [][]byte {
	t.Helper()
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	emit := func() {
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	replacements := []any{nil, json.Number("1"), json.Number("1e400"), "x", map[string]any{}, []any{}}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				old := x[k]
				delete(x, k)
				emit()
				for _, r := range replacements {
					x[k] = r
					emit()
				}
				x[k] = old
				walk(old)
			}
			for _, e := range extraMembers {
				if _, ok := x[e.name]; !ok {
					x[e.name] = e.value
					emit()
					delete(x, e.name)
				}
			}
		case []any:
			for _, item := range x {
				walk(item)
			}
		}
	}
	walk(doc)
	top := doc.(map[string]any)
	for _, id := range []any{json.Number("7"), json.Number("7.0"), json.Number("1e3"), json.Number("-0"),
		json.Number("12345678901234567890"), true, []any{json.Number("1")}, map[string]any{"a": "b"}, "<&>"} {
		top["id"] = id
		emit()
	}
	meta := top["params"].(map[string]any)["message"].(map[string]any)["metadata"].(map[string]any)
	meta["https://other.invalid/ext"] = map[string]any{"n": json.Number("1e400")}
	emit()
	meta["https://other.invalid/ext"] = map[string]any{"n": json.Number("1.5")}
	emit()
	return out
}

// extraMembers are added, one at a time, to every object of a body: a
// member nobody names, and members a2a-go reads somewhere in a request
// (message, params, part, file), the one pass must not drop.
var extraMembers = []struct {
	name  string
	value any
}{
	{"zz_extra", "x"}, {"contextId", "c-1"}, {"taskId", "t-1"}, {"referenceTaskIds", []any{"t-0"}},
	{"metadata", map[string]any{"k": "v"}}, {"configuration", map[string]any{"blocking": true}},
	{"uri", "https://x.invalid/o"}, {"name", "o.json"}, {"text", "hello"},
}

// byteMutations returns body with each byte replaced, in turn, by each of
// a few bytes that break or bend the layout the template reads.
func byteMutations(body []byte) [][]byte {
	var out [][]byte
	for i := range body {
		for _, c := range []byte{'"', '\\', ' ', '0', '}', ',', 0x80} {
			if body[i] == c {
				continue
			}
			b := bytes.Clone(body)
			b[i] = c
			out = append(out, b)
		}
	}
	return out
}

// TestOnePassReadsAsA2AGo: on party's requests for real objects, a2a-go's
// for the same messages, every JSON mutation of them and every byte
// mutation of a small one, the one pass declines or reads what a2a-go
// reads.
func TestOnePassReadsAsA2AGo(t *testing.T) {
	seeds := requestSeeds(t)
	read, declined := 0, 0
	count := func(ok bool) {
		if ok {
			read++
		} else {
			declined++
		}
	}
	for i, body := range seeds {
		if !sameAsA2AGo(t, body) {
			t.Fatalf("seed %d declined: %s", i, body)
		}
		read++
		if i < 2 { // one of ours and a2a-go's, for the mutations
			for _, m := range jsonMutations(t, body) {
				count(sameAsA2AGo(t, m))
			}
		}
	}
	small := encodeSend(fastTxn, fastObjects[1:])
	for _, m := range byteMutations(small) {
		count(sameAsA2AGo(t, m))
	}
	t.Logf("%d bodies read in one pass as a2a-go reads them, %d declined", read, declined)
	if read < 50 || declined < 50 {
		t.Fatalf("only %d read and %d declined: the mutations missed both ways", read, declined)
	}
}

// FuzzOnePassVsA2AGo: any body, seeded with party's and a2a-go's requests
// for real objects: the one pass declines or reads what a2a-go reads.
func FuzzOnePassVsA2AGo(f *testing.F) {
	for _, s := range requestSeeds(f) {
		f.Add(s)
	}
	small := encodeSend(fastTxn, fastObjects[1:])
	f.Add(small)
	for _, id := range []string{`7`, `7.0`, `1e400`, `12345678901234567890`, `{"a":1}`, `null`, `"\u0041"`} {
		at := bytes.LastIndex(small, []byte(`,"id":`))
		f.Add(append(bytes.Clone(small[:at]), `,"id":`+id+`}`...))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsA2AGo(t, body)
	})
}
