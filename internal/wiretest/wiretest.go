// Package wiretest records the HTTP exchanges a pinned peer client makes
// and writes them as a golden txtar, for the wire goldens of the peer
// bindings (bindings/a2a, bindings/https).
//
// Recording happens under the client's own transport, so a request is
// seen with every header the binding set on it and a response as the
// client received it off the connection. Values that differ between runs
// (ids, signatures, key ids, ports, boundaries) are replaced by numbered
// placeholders, <name-1>, <name-2>, ..., in order of first appearance
// across the whole archive: the same value always gets the same
// placeholder, so which values are equal stays pinned.
package wiretest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/diff"
	"github.com/rogpeppe/go-internal/txtar"
)

// Exchange is one request and the response to it.
type Exchange struct {
	Method     string
	Target     string // path and query
	ReqHeader  http.Header
	ReqBody    []byte
	Status     int
	RespHeader http.Header
	RespBody   []byte
}

// Recorder holds the exchanges of one client.
type Recorder struct {
	keep func(*http.Request) bool
	mu   sync.Mutex
	ex   []Exchange
}

// Record puts a recorder under hc's transport and returns it. Only
// requests keep accepts are recorded (nil: all). Call it before hc sends
// anything.
func Record(hc *http.Client, keep func(*http.Request) bool) *Recorder {
	rec := &Recorder{keep: keep}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &transport{base: base, rec: rec}
	return rec
}

// Exchanges returns what was recorded, in the order the requests were
// sent.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ex)
}

type transport struct {
	base http.RoundTripper
	rec  *Recorder
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.rec.keep != nil && !t.rec.keep(r) {
		return t.base.RoundTrip(r)
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		// The request is the caller's: send a copy carrying the bytes read.
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	t.rec.mu.Lock()
	i := len(t.rec.ex)
	t.rec.ex = append(t.rec.ex, Exchange{Method: r.Method, Target: r.URL.RequestURI(), ReqHeader: r.Header.Clone(), ReqBody: body})
	t.rec.mu.Unlock()
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	t.rec.mu.Lock()
	e := &t.rec.ex[i]
	e.Status, e.RespHeader, e.RespBody = resp.StatusCode, resp.Header.Clone(), rb
	t.rec.mu.Unlock()
	return resp, nil
}

// Rule finds one kind of volatile value: the first submatch of Re if it
// has one, else the whole match, stands for <Name-n>. A Literal rule's
// values are also replaced wherever they occur later in the archive (a
// multipart boundary, say, found in a header and repeated in the body).
type Rule struct {
	Name    string
	Re      *regexp.Regexp
	Literal bool
}

// Rules that fit party's peer wire.
var (
	// UUID is an A2A message or JSON-RPC id (a2a.NewMessageID).
	UUID = Rule{Name: "id", Re: regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)}
	// KeyID is a key id, drawn when an instance is initialised.
	KeyID = Rule{Name: "key", Re: regexp.MustCompile(`\bkey_[0-9a-f]{24}\b`)}
	// Signature is a signature value (ES256 signatures are randomised).
	Signature = Rule{Name: "signature", Re: regexp.MustCompile(`"signature": "([A-Za-z0-9_-]+)"`)}
	// Port is the port of a loopback listener, picked free per run.
	Port = Rule{Name: "port", Re: regexp.MustCompile(`\b127\.0\.0\.1:(\d+)\b`)}
	// Boundary is a multipart boundary, random per body.
	Boundary = Rule{Name: "boundary", Re: regexp.MustCompile(`\bboundary=([0-9a-zA-Z'()+_,./:=?-]+)`), Literal: true}
)

// Options say how an archive is written.
type Options struct {
	// Comment heads the archive.
	Comment string
	// Rules find the volatile values, applied in this order.
	Rules []Rule
	// Drop are header names left out of the archive: those the transport
	// manages (Date, Content-Length) rather than the binding.
	Drop []string
}

// Archive writes exchanges as a txtar: for the n-th exchange, n.request
// (method, target, headers sorted, body) and n.response (status, headers,
// body). A JSON body is indented (json.Indent: member order and escapes
// as sent); a multipart body is shown with CRLF as LF and each JSON line
// indented. A JSON string member "bytes" whose value is base64 of a JSON
// object is shown as <object-n>, and the object, indented, in a section
// object-n.json after the first section naming it.
func Archive(exchanges []Exchange, o Options) []byte {
	n := &normaliser{rules: o.Rules, seen: map[string]string{}, count: map[string]int{}, objects: map[string]string{}}
	ar := &txtar.Archive{Comment: []byte(o.Comment)}
	add := func(name string, text string) {
		text, objects := n.extractObjects(text)
		ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(n.apply(text))})
		for _, obj := range objects {
			ar.Files = append(ar.Files, txtar.File{Name: obj.name + ".json", Data: []byte(n.apply(obj.text))})
		}
	}
	for i, e := range exchanges {
		var req strings.Builder
		fmt.Fprintf(&req, "%s %s\n", e.Method, e.Target)
		writeHeader(&req, e.ReqHeader, o.Drop)
		writeBody(&req, e.ReqBody)
		add(fmt.Sprintf("%d.request", i+1), req.String())
		var resp strings.Builder
		fmt.Fprintf(&resp, "%d %s\n", e.Status, http.StatusText(e.Status))
		writeHeader(&resp, e.RespHeader, o.Drop)
		writeBody(&resp, e.RespBody)
		add(fmt.Sprintf("%d.response", i+1), resp.String())
	}
	return txtar.Format(ar)
}

func writeHeader(b *strings.Builder, h http.Header, drop []string) {
	names := make([]string, 0, len(h))
	for k := range h {
		if !slices.ContainsFunc(drop, func(d string) bool { return strings.EqualFold(d, k) }) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range h[k] {
			fmt.Fprintf(b, "%s: %s\n", k, v)
		}
	}
}

func writeBody(b *strings.Builder, body []byte) {
	if len(body) == 0 {
		return
	}
	b.WriteString("\n")
	b.WriteString(indentBody(body))
}

// indentBody is a body as the archive shows it, ending in a newline.
func indentBody(body []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, bytes.TrimSpace(body), "", "  ") == nil {
		return out.String() + "\n"
	}
	lines := strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n")
	for i, l := range lines {
		out.Reset()
		if strings.HasPrefix(l, "{") && json.Indent(&out, []byte(l), "", "  ") == nil {
			lines[i] = out.String()
		}
	}
	s := strings.Join(lines, "\n")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

type normaliser struct {
	rules   []Rule
	seen    map[string]string // value -> placeholder, per rule name
	count   map[string]int
	literal []string // Literal values in order of first appearance
	objects map[string]string
	nobj    int
}

func (n *normaliser) placeholder(rule, v string) string {
	key := rule + "\x00" + v
	if p, ok := n.seen[key]; ok {
		return p
	}
	n.count[rule]++
	p := fmt.Sprintf("<%s-%d>", rule, n.count[rule])
	n.seen[key] = p
	return p
}

func (n *normaliser) apply(s string) string {
	for _, r := range n.rules {
		var b strings.Builder
		last := 0
		for _, m := range r.Re.FindAllStringSubmatchIndex(s, -1) {
			start, end := m[0], m[1]
			if len(m) >= 4 && m[2] >= 0 {
				start, end = m[2], m[3]
			}
			v := s[start:end]
			if r.Literal && !slices.Contains(n.literal, r.Name+"\x00"+v) {
				n.literal = append(n.literal, r.Name+"\x00"+v)
			}
			b.WriteString(s[last:start])
			b.WriteString(n.placeholder(r.Name, v))
			last = end
		}
		b.WriteString(s[last:])
		s = b.String()
	}
	for _, l := range n.literal {
		rule, v, _ := strings.Cut(l, "\x00")
		s = strings.ReplaceAll(s, v, n.placeholder(rule, v))
	}
	return s
}

var bytesMember = regexp.MustCompile(`"bytes": "([A-Za-z0-9+/]+=*)"`)

type object struct{ name, text string }

// extractObjects replaces base64 JSON objects in "bytes" members by
// <object-n> and returns the objects first seen here.
func (n *normaliser) extractObjects(s string) (string, []object) {
	var found []object
	s = bytesMember.ReplaceAllStringFunc(s, func(m string) string {
		b64 := bytesMember.FindStringSubmatch(m)[1]
		if name, ok := n.objects[b64]; ok {
			return `"bytes": "<` + name + `>"`
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		var out bytes.Buffer
		if err != nil || !json.Valid(raw) || json.Indent(&out, raw, "", "  ") != nil || !bytes.HasPrefix(raw, []byte("{")) {
			return m
		}
		n.nobj++
		name := fmt.Sprintf("object-%d", n.nobj)
		n.objects[b64] = name
		found = append(found, object{name, out.String() + "\n"})
		return `"bytes": "<` + name + `>"`
	})
	return s, found
}

// Golden compares got (a wire exchange, a list of query plans) with the
// file at path, or with update writes got there. A difference fails t
// with a unified diff and says how to accept it (regen, the command that
// rewrites the file).
func Golden(t testing.TB, path string, got []byte, update bool, regen string) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with: %s)", err, regen)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("what the test produced differs from %s; if that is meant, rewrite it with\n\t%s\nand review the diff like code:\n%s", path, regen, diff.Diff(path, want, "now", got))
	}
}
