package a2a

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/partyd/party/internal/delivery"
)

// TestTemplateTakesWhatThisBindingWrites: the request and the answer this
// binding writes are read by the template (the one-pass reader's own
// reader), with the values decodeStrict reads from them.
func TestTemplateTakesWhatThisBindingWrites(t *testing.T) {
	t.Parallel()
	for _, txn := range []string{fastTxn, ""} {
		body := encodeSend(txn, fastObjects)
		got, ok := matchSend(body)
		if !ok {
			t.Fatalf("a request this binding wrote is not in the template:\n%s", body)
		}
		var want wireRequest
		if err := decodeStrict(body, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("template %+v\ndecodeStrict %+v (%v)", got, want, err)
		}
		for _, id := range []string{`"r-1"`, `17`, `0`, `null`} {
			reply := encodeResult(json.RawMessage(id), txn, fastObjects)
			got, ok := matchReply(reply)
			if !ok {
				t.Fatalf("an answer this binding wrote is not in the template:\n%s", reply)
			}
			var want wireReply
			if err := decodeStrict(reply, &want); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("id %s: template %+v\ndecodeStrict %+v (%v)", id, got, want, err)
			}
		}
	}
	// Anything out of the layout is declined, and left to decodeStrict.
	body := encodeSend(fastTxn, fastObjects)
	for name, b := range map[string][]byte{
		"white space":     bytes.Replace(body, []byte(`{"kind":"message"`), []byte(`{ "kind":"message"`), 1),
		"escaped string":  bytes.Replace(body, []byte(`"message/send"`), []byte(`"message\/send"`), 1),
		"another order":   bytes.Replace(body, []byte(`{"jsonrpc":"2.0","method":"message/send"`), []byte(`{"method":"message/send","jsonrpc":"2.0"`), 1),
		"a member more":   bytes.Replace(body, []byte(`"mimeType":`), []byte(`"name":"x","mimeType":`), 1),
		"a fractional id": append(bytes.TrimSuffix(body, []byte(`}`))[:bytes.LastIndex(body, []byte(`"id":`))+5], []byte(`1.5}`)...),
		"trailing value":  append(append([]byte(nil), body...), []byte(` {}`)...),
	} {
		if _, ok := matchSend(b); ok {
			t.Errorf("%s: taken by the template:\n%s", name, b)
		}
	}
}

// FuzzTemplate: whatever the template reads, decodeStrict reads to the
// same values.
func FuzzTemplate(f *testing.F) {
	f.Add(encodeSend(fastTxn, fastObjects))
	f.Add(encodeSend("", nil))
	f.Add(encodeResult(json.RawMessage(`"x"`), fastTxn, fastObjects))
	f.Add(encodeResult(json.RawMessage(`12`), "", fastObjects[:1]))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","messageId":"m","extensions":["` + delivery.ExtensionURI +
		`"],"metadata":{"k":{"transaction_id":null}},"parts":[{"kind":"file","file":{"mimeType":"a","bytes":"` + base64.StdEncoding.EncodeToString([]byte("{}")) + `"}}],"role":"user"}},"id":null}` + "\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, ok := matchSend(body); ok {
			var want wireRequest
			if err := decodeStrict(body, &want); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s\ntemplate %+v\ndecodeStrict %+v (%v)", body, got, want, err)
			}
		}
		if got, ok := matchReply(body); ok {
			var want wireReply
			if err := decodeStrict(body, &want); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s\ntemplate %+v\ndecodeStrict %+v (%v)", body, got, want, err)
			}
		}
	})
}

// BenchmarkReadSend: a request of five 2 KiB objects read by decodeStrict
// and by the template.
func BenchmarkReadSend(b *testing.B) {
	var objs [][]byte
	for range 5 {
		objs = append(objs, bytes.Repeat([]byte(`{"a":"0123456789abcdef"}`), 85))
	}
	body := encodeSend(fastTxn, objs)
	b.Run("decodeStrict", func(b *testing.B) {
		for b.Loop() {
			var r wireRequest
			if err := decodeStrict(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("template", func(b *testing.B) {
		for b.Loop() {
			if _, ok := matchSend(body); !ok {
				b.Fatal("declined")
			}
		}
	})
}
