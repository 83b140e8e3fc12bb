package wiretest

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

func TestArchiveNumbersInOrderOfFirstAppearance(t *testing.T) {
	obj := base64.StdEncoding.EncodeToString([]byte(`{"key_id":"key_000000000000000000000002"}`))
	ex := []Exchange{{
		Method:    "POST",
		Target:    "/x",
		ReqHeader: http.Header{"Content-Type": {"multipart/mixed; boundary=abc123"}, "Date": {"now"}},
		ReqBody:   []byte("--abc123\r\nX: key_000000000000000000000001\r\n\r\n{\"a\":1}\r\n--abc123--\r\n"),
		Status:    200,
		RespBody:  []byte(`{"k":["key_000000000000000000000002","key_000000000000000000000001"],"bytes":"` + obj + `","again":{"bytes":"` + obj + `"}}`),
	}}
	got := string(Archive(ex, Options{Rules: []Rule{Boundary, KeyID}, Drop: []string{"date"}}))
	for _, want := range []string{
		"Content-Type: multipart/mixed; boundary=<boundary-1>\n",
		"--<boundary-1>\nX: <key-1>\n\n{\n  \"a\": 1\n}\n--<boundary-1>--\n",
		"\"<key-2>\",\n    \"<key-1>\"",
		`"bytes": "<object-1>",`,
		`"bytes": "<object-1>"` + "\n",
		"-- object-1.json --\n{\n  \"key_id\": \"<key-2>\"\n}\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("archive lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Date") || strings.Contains(got, "abc123") || strings.Count(got, "-- object-") != 1 {
		t.Errorf("archive:\n%s", got)
	}
}
