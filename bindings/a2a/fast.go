package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/reason"
)

// One pass over message/send.
//
// a2a-go decodes a message/send request four times over: the JSON-RPC
// envelope with its params kept raw, the params into a Message, its parts
// kept raw, each part once for its kind and once more as that kind; and
// its client decodes a response as often. A202 objects travel base64 in
// those parts, so every pass reads every object's bytes again: about a
// twentieth of a formation's CPU went to it, on both ends. Both ends of
// this binding therefore read and write the messages they exchange, and
// the shape an A2A implementation writes for them, in one pass of their
// own (wireRequest, wireReply, appendMessage), and leave anything else to
// a2a-go:
//
//   - the server reads a request in one pass when it is exactly the shape
//     of a message/send carrying file parts with bytes (fastSend): every
//     member known, every part a file with bytes and a media type, the
//     correlation metadata an object. Anything else, a text or data part,
//     a member this shape does not name, a task id, goes to a2a-go's
//     handler as before, which decides and answers (Server.serveEndpoint).
//   - the client writes its request and reads the answer in one pass; an
//     answer of another shape (a Task, a message with other members) is
//     read by a2a-go (a2a.UnmarshalEventJSON).
//
// The bytes of this shape in the very layout this binding writes are read
// by a template, without a JSON decoder (template.go); bytes of the shape
// in any other layout by decodeStrict.
//
// What is written is what a2a-go writes for the same message, member for
// member (the tests decode it with a2a-go and compare); what is read in one
// pass is read as a2a-go reads it (FuzzOnePassRequest compares the two on any
// input the fast reader accepts; TestOnePassReadsAsA2AGo and
// FuzzOnePassVsA2AGo compare every member a2a-go's server decodes).

// wireRequest is a message/send request as a2a-go's client writes it.
type wireRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  wireParams      `json:"params"`
	ID      json.RawMessage `json:"id"`
}

type wireParams struct {
	Message wireMessage `json:"message"`
}

// wireMessage is an A2A Message of file parts with bytes, correlated by
// the extension's metadata.
type wireMessage struct {
	Kind       string                     `json:"kind"`
	MessageID  string                     `json:"messageId"`
	Extensions []string                   `json:"extensions"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	Parts      []wirePart                 `json:"parts"`
	Role       string                     `json:"role"`
}

type wirePart struct {
	Kind string    `json:"kind"`
	File *wireFile `json:"file"`
}

type wireFile struct {
	MimeType string `json:"mimeType"`
	Name     string `json:"name"`
	Bytes    string `json:"bytes"`
}

// wireReply is a JSON-RPC response to message/send: a Message result, or
// an error.
type wireReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *wireMessage    `json:"result"`
	Error   *rpcError       `json:"error"`
}

// errNotFast says a message is not of the one shape read in one pass; the
// caller hands it to a2a-go.
var errNotFast = errors.New("a2a: not the one-pass shape")

// decodeStrict decodes data into v, refusing members v does not name and
// anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errNotFast
	}
	return nil
}

// fastSend reads a message/send request in one pass: its id, the message's
// correlation id and objects. errNotFast (wrapped) means the request is
// not of the shape this reads, and a2a-go reads it; any other error is
// the request's own fault, as a2a-go would find it (readMessage's rules).
func fastSend(body []byte) (req wireRequest, txn string, objects [][]byte, err error) {
	req, ok := matchSend(body)
	if !ok {
		if err := decodeStrict(body, &req); err != nil {
			return req, "", nil, fmt.Errorf("%w: %v", errNotFast, err)
		}
	}
	if req.JSONRPC != "2.0" || req.Method != "message/send" || req.Params.Message.Kind != "message" ||
		req.Params.Message.Role != string(a2a.MessageRoleUser) && req.Params.Message.Role != string(a2a.MessageRoleAgent) ||
		!idAsA2AGo(req.ID) {
		return req, "", nil, errNotFast
	}
	txn, objects, err = req.Params.Message.read()
	return req, txn, objects, err
}

// idAsA2AGo reports whether a JSON-RPC id is echoed as a2a-go echoes it.
// a2a-go decodes the id into any and writes that back: a string or null
// keeps its value, a number goes through float64, and one that does not
// fit (1e400) makes it refuse the request. serveSend echoes the id's
// bytes, so a non-string id is read in one pass only when those bytes are
// a2a-go's re-encoding of it.
func idAsA2AGo(id json.RawMessage) bool {
	if len(id) == 0 || id[0] == '"' || string(id) == "null" {
		return true
	}
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return false
	}
	b, err := json.Marshal(v)
	return err == nil && bytes.Equal(b, id)
}

// read is readMessage for a message of this shape: a part that is not a
// file with bytes goes to a2a-go (errNotFast); a file of another media
// type, or bytes that are not base64, are refused as readMessage refuses
// them.
func (m *wireMessage) read() (string, [][]byte, error) {
	meta := make(map[string]any, len(m.Metadata))
	for k, raw := range m.Metadata {
		// Another extension's metadata is not read, but a2a-go decodes it
		// (into any) and refuses the message when that fails, a number
		// beyond float64 for one: so must this, by declining.
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", nil, fmt.Errorf("%w: metadata: %v", errNotFast, err)
		}
		if k == delivery.ExtensionURI {
			meta[k] = v
		}
	}
	txn, err := correlation(meta)
	if err != nil {
		return "", nil, err
	}
	objects := make([][]byte, 0, len(m.Parts))
	for i, p := range m.Parts {
		if p.Kind != "file" || p.File == nil || p.File.Bytes == "" {
			return "", nil, errNotFast
		}
		b, err := fileBytes(i, p.File.MimeType, p.File.Bytes)
		if err != nil {
			return "", nil, err
		}
		objects = append(objects, b)
	}
	return txn, objects, nil
}

// appendMessage writes an A2A Message carrying objects as file parts,
// correlated to txn, as a2a-go writes the Message newMessage builds
// (member for member; messageId fresh).
func appendMessage(buf []byte, role a2a.MessageRole, txn string, objects [][]byte) []byte {
	buf = append(buf, `{"kind":"message","messageId":`...)
	buf = appendJSONString(buf, a2a.NewMessageID())
	buf = append(buf, `,"extensions":[`...)
	buf = appendJSONString(buf, delivery.ExtensionURI)
	buf = append(buf, `],"metadata":{`...)
	buf = appendJSONString(buf, delivery.ExtensionURI)
	buf = append(buf, `:{"transaction_id":`...)
	if txn == "" {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(buf, txn)
	}
	buf = append(buf, `}},"parts":[`...)
	for i, o := range objects {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"kind":"file","file":{"mimeType":`...)
		buf = appendJSONString(buf, delivery.MediaType)
		buf = append(buf, `,"bytes":"`...)
		buf = base64.StdEncoding.AppendEncode(buf, o)
		buf = append(buf, `"}}`...)
	}
	buf = append(buf, `],"role":`...)
	buf = appendJSONString(buf, string(role))
	return append(buf, '}')
}

// appendJSONString writes s as a JSON string, as encoding/json does.
func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(buf, b...)
}

// encodeSend is the client's message/send request for objects.
func encodeSend(txn string, objects [][]byte) []byte {
	return encodeSendID(txn, objects, a2a.NewMessageID())
}

// encodeSendID is encodeSend under the JSON-RPC request id id, which the
// response must echo (readResult).
func encodeSendID(txn string, objects [][]byte, id string) []byte {
	n := 256
	for _, o := range objects {
		n += base64.StdEncoding.EncodedLen(len(o)) + 96
	}
	buf := make([]byte, 0, n)
	buf = append(buf, `{"jsonrpc":"2.0","method":"message/send","params":{"message":`...)
	buf = appendMessage(buf, a2a.MessageRoleUser, txn, objects)
	buf = append(buf, `},"id":`...)
	buf = appendJSONString(buf, id)
	return append(buf, '}')
}

// encodeResult is the server's response carrying reply objects, under
// the request's id.
func encodeResult(id json.RawMessage, txn string, objects [][]byte) []byte {
	n := 256 + len(id)
	for _, o := range objects {
		n += base64.StdEncoding.EncodedLen(len(o)) + 96
	}
	buf := make([]byte, 0, n)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, id...)
	}
	buf = append(buf, `,"result":`...)
	buf = appendMessage(buf, a2a.MessageRoleAgent, txn, objects)
	return append(buf, "}\n"...)
}

// readResult reads the client's response body: the JSON-RPC error, if
// any, and the reply objects of a Message result. A result of another
// shape is read by a2a-go (readReply). A result must answer the request
// whose id is id (JSON-RPC 2.0 §5: the response's id is the request's);
// an error may not (its id is null when the request could not be read).
func readResult(body []byte, txn, id string) (*rpcError, [][]byte, error) {
	r, ok := matchReply(body)
	var err error
	if !ok {
		err = decodeStrict(body, &r)
	}
	if err == nil && (r.Error != nil || r.Result != nil && r.Result.Kind == "message") {
		if r.Error != nil {
			return r.Error, nil, nil
		}
		if err := answers(r.ID, id); err != nil {
			return nil, nil, err
		}
		t, objs, err := r.Result.read()
		switch {
		case err == nil:
			if t != txn {
				return nil, nil, reason.Refusef(reason.StreamMismatch, "reply correlated to %q, the message to %q", t, txn)
			}
			return nil, objs, nil
		case !errors.Is(err, errNotFast):
			return nil, nil, err
		}
	}
	var loose struct {
		ID     json.RawMessage `json:"id"`
		Error  *rpcError       `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &loose); err != nil {
		return nil, nil, fmt.Errorf("the response is not JSON-RPC: %w", err)
	}
	if loose.Error != nil {
		return loose.Error, nil, nil
	}
	if err := answers(loose.ID, id); err != nil {
		return nil, nil, err
	}
	event, err := a2a.UnmarshalEventJSON(loose.Result)
	if err != nil {
		return nil, nil, fmt.Errorf("result violates A2A: %w", err)
	}
	res, ok := event.(a2a.SendMessageResult)
	if !ok {
		return nil, nil, fmt.Errorf("result of type %T", event)
	}
	objs, err := readReply(res, txn)
	return nil, objs, err
}

// answers says whether a response's id (raw JSON) is the request's, id.
func answers(raw json.RawMessage, id string) error {
	var got string
	if json.Unmarshal(raw, &got) != nil || got != id {
		return fmt.Errorf("the response answers JSON-RPC request %s, not %q", raw, id)
	}
	return nil
}
