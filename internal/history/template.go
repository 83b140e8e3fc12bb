package history

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/partyd/party/internal/authority"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// acts records every act document an evaluator reads, by its action hash.
// It is the evaluator's local policy, wrapping the one it had: it denies
// exactly what that one denies.
type acts struct {
	mu    sync.Mutex
	docs  map[string][]byte
	inner authority.Policy
}

// Deny implements authority.Policy.
func (a *acts) Deny(ctx context.Context, mandateID string, act map[string]any) []string {
	if h, err := authority.ActionHash(act); err == nil {
		if b, err := canonical.Marshal(act); err == nil {
			a.mu.Lock()
			a.docs[h] = b
			a.mu.Unlock()
		}
	}
	if a.inner != nil {
		return a.inner.Deny(ctx, mandateID, act)
	}
	return nil
}

// sig is one signature entry of a template object, to be made again.
type sig struct {
	keyID, purpose string
	at             time.Time
}

// tobj is one object of a template transaction.
type tobj struct {
	id, typ string
	hash    string         // its content hash
	val     map[string]any // decoded, without content_hash and signatures
	sigs    []sig
	seq     int // an event's sequence, else 0
	// body is the object as stored (canonical bytes), in its hash input
	// (canonical.HashInput: without content_hash and signatures); the
	// patches are where each holds an identifier, a hash or a signature
	// a copy replaces, each by a value of the same length (see compile).
	body, in               []byte
	bodyPatches, inPatches []patch
	keyOf                  map[string]string // a hash in the object: the member holding it
	sigValues              []string          // the template's signature values, in order
}

// patch is one value to replace in an object's bytes.
type patch struct {
	off, end int
	kind     byte // patchID, patchHash, patchSelf or patchSig
	old      string
	sig      int // patchSig: which signature entry
}

const (
	patchID   byte = iota // an identifier the transaction made
	patchHash             // a hash (content, act, derived or kept)
	patchSelf             // the object's own content_hash
	patchSig              // a signature value
)

// template is one genuine transaction, as both sides hold it.
type template struct {
	kind Kind
	txn  string
	// objs are the transaction's objects (both sides' union), in an
	// order where every object comes after those it names by hash.
	objs   []*tobj
	byHash map[string]*tobj
	// ids are the identifiers the transaction made, which a copy
	// replaces.
	ids map[string]bool
	// acts are the documents of the action hashes in the record (and of
	// the determinations' inputs hashes): the hash of a copy's is the
	// hash of the document with its identifiers and hashes replaced.
	acts map[string]map[string]any
	// terminations are the termination records of the
	// termination_record_hashes in the record, by hash.
	terminations map[string]termination
	// chain is the events' content hashes, by sequence (from 1).
	chain []string
	// rows are each side's rows about the transaction.
	rows [2][]store.Rows
	// state is each side's state of the transaction.
	state [2]string
	// stable are the hashes that stay in a copy (they cover no
	// identifier), with the member that holds them: for tests to read.
	stable map[string]string
}

// hexOf reports whether s is n lowercase hexadecimal characters.
func hexOf(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isHash reports whether s looks like a SHA-256 hash in hexadecimal.
func isHash(s string) bool { return hexOf(s, 64) }

// idTokens calls f on every identifier-shaped token in s (a lowercase
// prefix, "_", 24 lowercase hexadecimal characters) with its bounds.
func idTokens(s string, f func(start, end int)) {
	for i := 0; i < len(s); i++ {
		if s[i] != '_' {
			continue
		}
		j := i
		for j > 0 && 'a' <= s[j-1] && s[j-1] <= 'z' {
			j--
		}
		if j == i || i+25 > len(s) || !hexOf(s[i+1:i+25], 24) {
			continue
		}
		if j > 0 && isWord(s[j-1]) || i+25 < len(s) && isWord(s[i+25]) {
			continue
		}
		f(j, i+25)
		i += 24
	}
}

func isWord(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// newTemplate reads txn from both stores (buyer first) and the act
// documents recorded while it was traded.
func newTemplate(ctx context.Context, kind Kind, txn string, sts [2]*store.Store, docs map[string][]byte) (*template, error) {
	tp := &template{kind: kind, txn: txn, byHash: map[string]*tobj{}, ids: map[string]bool{txn: true}, acts: map[string]map[string]any{}, terminations: map[string]termination{}, stable: map[string]string{}}
	byID := map[string]*tobj{}
	var order []*tobj
	for i, st := range sts {
		rows, err := st.TransactionRows(ctx, txn)
		if err != nil {
			return nil, err
		}
		tp.rows[i] = rows
		t, err := st.GetTransaction(ctx, txn)
		if err != nil {
			return nil, err
		}
		tp.state[i] = t.State
		if t.SessionID != "" {
			tp.ids[t.SessionID] = true
		}
		for _, r := range rows {
			col := colIndex(r.Columns)
			switch r.Table {
			case "objects":
				for _, v := range r.Values {
					id := v[col["id"]].(string)
					tp.ids[id] = true
					if byID[id] != nil {
						continue
					}
					o, err := readObject(bytesOf(v[col["body"]]))
					if err != nil {
						return nil, fmt.Errorf("history: %s: %w", id, err)
					}
					byID[id] = o
					order = append(order, o)
				}
			case "approval_requests":
				for _, v := range r.Values {
					tp.ids[v[col["id"]].(string)] = true
				}
			}
		}
	}
	for _, o := range order {
		tp.byHash[o.hash] = o
		if o.typ == "transaction_event" {
			for len(tp.chain) < o.seq {
				tp.chain = append(tp.chain, "")
			}
			tp.chain[o.seq-1] = o.hash
		}
	}
	// The act documents of the action hashes the record holds, objects
	// and rows alike.
	need := func(h string) error {
		if _, done := tp.acts[h]; done {
			return nil
		}
		b, ok := docs[h]
		if !ok {
			return fmt.Errorf("history: no act document was recorded for action hash %s", h)
		}
		d, err := canonical.DecodeObject(b)
		if err != nil {
			return err
		}
		tp.acts[h] = d
		return nil
	}
	for _, o := range order {
		var err error
		walk(o.val, "", func(key, s string) {
			if key == "action_hash" && err == nil {
				err = need(s)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	for _, rows := range tp.rows {
		for _, r := range rows {
			if r.Table == "approval_requests" {
				col := colIndex(r.Columns)
				for _, v := range r.Values {
					if err := need(v[col["action_hash"]].(string)); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	// A determination's inputs_hash is the hash of a document of ids and
	// content hashes (verify.DeterminationInputs), made again as an act
	// document is.
	for _, o := range order {
		if o.typ == "determination" {
			if err := tp.determinationInputs(o, byID); err != nil {
				return nil, err
			}
		}
	}
	// A termination_record_hash is the hash of a record of ids and the
	// hash of the event before it (verify.TerminationRecord), made again
	// from its members.
	for _, o := range order {
		if o.typ == "transaction_event" {
			data, _ := payloadOf(o.val)["data"].(map[string]any)
			if h := str(data["termination_record_hash"]); h != "" {
				if err := tp.terminationRecord(h, order); err != nil {
					return nil, err
				}
			}
		}
	}
	// The order: what an object names by hash first.
	seen := map[*tobj]int{}
	var visit func(o *tobj) error
	visit = func(o *tobj) error {
		switch seen[o] {
		case 1:
			return fmt.Errorf("history: %s names itself through hashes", o.id)
		case 2:
			return nil
		}
		seen[o] = 1
		for _, d := range tp.deps(o) {
			if err := visit(d); err != nil {
				return err
			}
		}
		seen[o] = 2
		tp.objs = append(tp.objs, o)
		return nil
	}
	for _, o := range order {
		if err := visit(o); err != nil {
			return nil, err
		}
	}
	if err := tp.check(); err != nil {
		return nil, err
	}
	for _, o := range tp.objs {
		if err := o.compile(tp); err != nil {
			return nil, fmt.Errorf("history: %s: %w", o.id, err)
		}
	}
	return tp, nil
}

// compile finds where o's bytes hold what a copy replaces: the
// identifiers the transaction made, every hash (a quoted string of 64
// hexadecimal characters), its own content_hash and its signature
// values. Each is replaced by a value of the same length (an identifier
// by a fresh one of its prefix, a hash by a hash, a signature by an
// ES256 or EdDSA signature of 64 bytes), and none is a member name, so
// the bytes a copy gets are the canonical form of the copy.
func (o *tobj) compile(tp *template) error {
	in, err := canonical.HashInput(o.val)
	if err != nil {
		return err
	}
	if canonical.SHA256Hex(in) != o.hash {
		return fmt.Errorf("its content_hash is not its hash input's")
	}
	o.in = in
	o.keyOf = map[string]string{}
	walk(o.val, "", func(key, s string) {
		if _, seen := o.keyOf[s]; isHash(s) && !seen {
			o.keyOf[s] = key
		}
	})
	var sigs [][2]int
	for k, v := range o.sigValues {
		i := strings.Index(string(o.body), `"`+v+`"`)
		if i < 0 || len(v) != 86 {
			return fmt.Errorf("signature %d is not a 64-byte value held once", k)
		}
		sigs = append(sigs, [2]int{i + 1, i + 1 + len(v)})
	}
	find := func(b []byte, withSigs bool) []patch {
		var ps []patch
		str := string(b)
		inSig := func(i int) bool {
			for _, r := range sigs {
				if withSigs && r[0] <= i && i < r[1] {
					return true
				}
			}
			return false
		}
		idTokens(str, func(i, j int) {
			if tp.ids[str[i:j]] && !inSig(i) {
				ps = append(ps, patch{off: i, end: j, kind: patchID, old: str[i:j]})
			}
		})
		for i := 0; i+66 <= len(str); i++ {
			if str[i] != '"' || str[i+65] != '"' || !isHash(str[i+1:i+65]) {
				continue
			}
			h := str[i+1 : i+65]
			kind := patchHash
			if h == o.hash {
				kind = patchSelf
			}
			ps = append(ps, patch{off: i + 1, end: i + 65, kind: kind, old: h})
			i += 65
		}
		if withSigs {
			for k, r := range sigs {
				ps = append(ps, patch{off: r[0], end: r[1], kind: patchSig, sig: k})
			}
		}
		sort.Slice(ps, func(a, b int) bool { return ps[a].off < ps[b].off })
		return ps
	}
	o.inPatches = find(o.in, false)
	o.bodyPatches = find(o.body, true)
	for _, ps := range [][]patch{o.inPatches, o.bodyPatches} {
		for i := 1; i < len(ps); i++ {
			if ps[i].off < ps[i-1].end {
				return fmt.Errorf("two values to replace overlap at byte %d", ps[i].off)
			}
		}
	}
	for _, p := range o.inPatches {
		if p.kind == patchSelf {
			return fmt.Errorf("its hash input holds its own content hash")
		}
	}
	return nil
}

// colIndex maps column names to their positions.
func colIndex(cols []string) map[string]int {
	m := make(map[string]int, len(cols))
	for i, c := range cols {
		m[c] = i
	}
	return m
}

// readObject decodes a stored object into a template object.
func readObject(body []byte) (*tobj, error) {
	obj, err := canonical.DecodeObject(body)
	if err != nil {
		return nil, err
	}
	again, err := canonical.Marshal(obj)
	if err != nil || string(again) != string(body) {
		return nil, fmt.Errorf("not stored in its canonical form (%v)", err)
	}
	entries, err := signature.Entries(obj)
	if err != nil {
		return nil, err
	}
	o := &tobj{id: str(obj["id"]), typ: str(obj["object_type"]), hash: str(obj["content_hash"]), body: body}
	for _, e := range entries {
		o.sigValues = append(o.sigValues, str(e["signature"]))
		at, err := envelope.ParseTimestamp(str(e["signed_at"]))
		if err != nil {
			return nil, err
		}
		o.sigs = append(o.sigs, sig{keyID: str(e["key_id"]), purpose: str(e["purpose"]), at: at})
	}
	delete(obj, "content_hash")
	delete(obj, "signatures")
	o.val = obj
	if o.typ == "transaction_event" {
		p, _ := obj["payload"].(map[string]any)
		n, ok := p["sequence"]
		if !ok {
			return nil, fmt.Errorf("an event with no sequence")
		}
		var seq int
		if _, err := fmt.Sscan(fmt.Sprint(n), &seq); err != nil || seq < 1 {
			return nil, fmt.Errorf("an event with sequence %v", n)
		}
		o.seq = seq
	}
	return o, nil
}

func str(v any) string { s, _ := v.(string); return s }

// bytesOf is a column's bytes, read as a BLOB or as TEXT.
func bytesOf(v any) []byte {
	if s, ok := v.(string); ok {
		return []byte(s)
	}
	b, _ := v.([]byte)
	return b
}

// walk calls f on every string value in v with the name of the member
// that holds it (for an array's items, the array's).
func walk(v any, key string, f func(key, s string)) {
	switch x := v.(type) {
	case string:
		f(key, x)
	case map[string]any:
		for k, y := range x {
			walk(y, k, f)
		}
	case []any:
		for _, y := range x {
			walk(y, key, f)
		}
	}
}

// deps are the objects o names by hash: directly, through an act
// document, or (audit_bundle_hash) the events before it.
func (tp *template) deps(o *tobj) []*tobj {
	var out []*tobj
	var hashes func(v any)
	hashes = func(v any) {
		walk(v, "", func(key, s string) {
			if !isHash(s) {
				return
			}
			if d := tp.byHash[s]; d != nil && d != o {
				out = append(out, d)
			}
			if doc, ok := tp.acts[s]; ok {
				hashes(doc)
			}
			if r, ok := tp.terminations[s]; ok {
				out = append(out, tp.byHash[r.previous])
			}
			if key == "audit_bundle_hash" {
				for _, h := range tp.chain[:max(0, o.seq-1)] {
					if d := tp.byHash[h]; d != nil {
						out = append(out, d)
					}
				}
			}
		})
	}
	hashes(o.val)
	return out
}

// check makes sure every hash of the template is one a copy knows how to
// make again, or covers no identifier; and that the derived hashes
// computed here are the engine's.
func (tp *template) check() error {
	for _, o := range tp.objs {
		var err error
		walk(o.val, "", func(key, s string) {
			if err != nil || !isHash(s) || tp.byHash[s] != nil || tp.acts[s] != nil || tp.terminations[s].previous != "" {
				return
			}
			switch key {
			case "audit_bundle_hash":
				h, e := auditBundleHash(tp.txn, tp.chain[:max(0, o.seq-1)])
				if e != nil || h != s {
					err = fmt.Errorf("history: audit_bundle_hash of %s is not the chain's (%v)", o.id, e)
				}
			case "mapping_report_hash":
				h, e := tp.mappingReportHash(o.val, func(s string) string { return s })
				if e != nil || h != s {
					err = fmt.Errorf("history: mapping_report_hash of %s is not computed as here (%v)", o.id, e)
				}
			default:
				tp.stable[s] = o.typ + "." + key
			}
		})
		if err != nil {
			return err
		}
	}
	// The rows' hashes: each one mapped or computed.
	for _, rows := range tp.rows {
		for _, r := range rows {
			for _, v := range r.Values {
				for i, c := range r.Columns {
					s, ok := v[i].(string)
					if !ok || !isHash(s) || tp.byHash[s] != nil || tp.acts[s] != nil {
						continue
					}
					switch {
					case r.Table == "inbox" && c == "message_key":
					case r.Table == "settlements" && c == "fingerprint":
						col := colIndex(r.Columns)
						if f := tp.fingerprint(v[col["instruction_id"]].(string), func(s string) string { return s }); f != s {
							return fmt.Errorf("history: the fingerprint of settlement %v is not computed as here", v[col["instruction_id"]])
						}
					default:
						return fmt.Errorf("history: %s.%s holds hash %s, which a copy does not know how to make", r.Table, c, s)
					}
				}
			}
		}
	}
	return nil
}

// auditBundleHash is the engine's: the hash of {transaction_id,
// event_hashes} over the chain before the completing event.
func auditBundleHash(txn string, chain []string) (string, error) {
	list := make([]any, len(chain))
	for i, h := range chain {
		list[i] = h
	}
	return canonical.Hash(map[string]any{"transaction_id": txn, "event_hashes": list})
}

// payloadOf returns an object's payload.
func payloadOf(v map[string]any) map[string]any {
	p, _ := v["payload"].(map[string]any)
	return p
}

// instruction finds the settlement instruction id names.
func (tp *template) instruction(id string) map[string]any {
	for _, o := range tp.objs {
		if o.id == id {
			return payloadOf(o.val)
		}
	}
	return nil
}

// mappingReportHash is the engine's mapping report hash of an adapter
// receipt (record/settlement.go): what was sent to the rail, from the
// receipt and its instruction; ids maps the template's identifiers to the
// copy's.
func (tp *template) mappingReportHash(receipt map[string]any, ids func(string) string) (string, error) {
	p := payloadOf(receipt)
	in := tp.instruction(str(p["settlement_instruction_id"]))
	if in == nil {
		return "", fmt.Errorf("the instruction %v is not held", p["settlement_instruction_id"])
	}
	amount, _ := in["amount"].(map[string]any)
	return canonical.Hash(map[string]any{"settlement_instruction_id": ids(str(p["settlement_instruction_id"])), "idempotency_key": replaceIDs(str(p["idempotency_key"]), ids),
		"currency": amount["currency"], "amount": amount["amount"], "payer_organization_id": in["payer_organization_id"], "payee_organization_id": in["payee_organization_id"],
		"attempt": p["attempt"]})
}

// fingerprint is the engine's fingerprint of a settlement instruction
// (record/settlement.go, instructionFingerprint): the obligation, the
// amount, the parties and the rail.
func (tp *template) fingerprint(instructionID string, ids func(string) string) string {
	p := tp.instruction(instructionID)
	amount, _ := p["amount"].(map[string]any)
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s", ids(str(p["obligation_id"])), str(amount["currency"]), str(amount["amount"]),
		str(p["payer_organization_id"]), str(p["payee_organization_id"]), str(p["rail"]))))
	return hex.EncodeToString(h[:])
}

// replaceIDs replaces every identifier token of s by ids.
func replaceIDs(s string, ids func(string) string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	last := 0
	idTokens(s, func(i, j int) {
		n := ids(s[i:j])
		if n == s[i:j] {
			return
		}
		b.WriteString(s[last:i])
		b.WriteString(n)
		last = j
	})
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// Stable returns the hashes of kind's template that copies keep, each with
// the member holding it, sorted: those that cover no identifier.
func (src *Source) Stable(kind Kind) []string {
	var out []string
	for h, where := range src.templates[kind].stable {
		out = append(out, where+" "+h)
	}
	sort.Strings(out)
	return out
}

// determinationInputs rebuilds the input set of determination o, which its
// inputs_hash binds, and keeps it as the document of that hash.
func (tp *template) determinationInputs(o *tobj, byID map[string]*tobj) error {
	p := payloadOf(o.val)
	question, _ := p["question"].(map[string]any)
	outcome, _ := p["outcome"].(map[string]any)
	ref := func(id string) (verify.InputRef, error) {
		x := byID[id]
		if x == nil {
			return verify.InputRef{}, fmt.Errorf("history: %s names %s, not of its transaction", o.id, id)
		}
		return verify.InputRef{ID: x.id, Hash: x.hash}, nil
	}
	dsp, err := ref(str(p["dispute_id"]))
	if err != nil {
		return err
	}
	subject := tp.byHash[str(question["subject_hash"])]
	if subject == nil {
		return fmt.Errorf("history: the subject of %s is not of its transaction", o.id)
	}
	var evidence []verify.InputRef
	list, _ := outcome["evidence_relied_on"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		r, err := ref(str(m["evidence_id"]))
		if err != nil {
			return err
		}
		evidence = append(evidence, r)
	}
	var superseded *verify.InputRef
	if sup, ok := p["supersedes"].(map[string]any); ok {
		r, err := ref(str(sup["determination_id"]))
		if err != nil {
			return err
		}
		superseded = &r
	}
	doc := verify.DeterminationInputs(question["rules_ref"], dsp, verify.InputRef{ID: subject.id, Hash: subject.hash}, evidence, superseded)
	h, err := canonical.Hash(doc)
	if err != nil {
		return err
	}
	if h != str(outcome["inputs_hash"]) {
		return fmt.Errorf("history: the inputs_hash of %s is not rebuilt here", o.id)
	}
	tp.acts[h] = doc
	return nil
}

// termination is what a termination record is made of, besides the
// transaction: the agreement, the hash of the event before the
// termination and the obligations it releases.
type termination struct {
	agreement, previous string
	open                []string
}

// terminationRecord finds the members of the termination record that
// hashes to h among the template's objects: one of its agreements, one
// of its events, and its obligations (all, or none).
func (tp *template) terminationRecord(h string, objs []*tobj) error {
	var agreements, obligations []string
	for _, o := range objs {
		switch o.typ {
		case "agreement":
			agreements = append(agreements, o.id)
		case "obligation":
			obligations = append(obligations, o.id)
		}
	}
	for _, agr := range agreements {
		for _, prev := range tp.chain {
			for _, open := range [][]string{obligations, nil} {
				if got, err := verify.TerminationRecordHash(tp.txn, agr, prev, open); err == nil && got == h {
					tp.terminations[h] = termination{agreement: agr, previous: prev, open: open}
					return nil
				}
			}
		}
	}
	return fmt.Errorf("history: termination_record_hash %s is not rebuilt from the record", h)
}
