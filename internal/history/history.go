package history

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
	"github.com/partyd/party/internal/verify"
)

// Kind is the shape of a generated transaction (see the package comment).
type Kind string

// The shapes generated.
const (
	Completed     Kind = "completed"
	Committed     Kind = "committed"
	InPerformance Kind = "in_performance"
	OpenOffer     Kind = "open_offer"
	Disputed      Kind = "disputed"
	Terminated    Kind = "terminated"
)

// Kinds are the shapes, in the order Trade trades their templates.
var Kinds = []Kind{Completed, Committed, InPerformance, OpenOffer, Disputed, Terminated}

// Share is a shape's weight in a Mix.
type Share struct {
	Kind   Kind
	Weight int
}

// Mix is how many of each shape a history holds, by weight.
type Mix []Share

// DefaultMix is 68 % completed, 5 % committed, 12 % in performance, 8 %
// open offers, 5 % disputed and 2 % terminated.
var DefaultMix = Mix{{Completed, 68}, {Committed, 5}, {InPerformance, 12}, {OpenOffer, 8}, {Disputed, 5}, {Terminated, 2}}

// sequence is one period of the mix: the shapes in proportion to their
// weights, spread out evenly (smooth weighted round robin), so that any
// stretch of a history has about the mix's proportions.
func (m Mix) sequence() []Kind {
	total := 0
	for _, s := range m {
		total += s.Weight
	}
	cur := make([]int, len(m))
	var out []Kind
	for range total {
		best := -1
		for i, s := range m {
			cur[i] += s.Weight
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out = append(out, m[best].Kind)
	}
	return out
}

// Source makes histories for one pair of instances: the templates traded
// on it and the keys that sign its objects.
type Source struct {
	stores    [2]*store.Store // buyer, supplier
	signers   map[string]signature.Signer
	templates map[Kind]*template
}

// Trade trades one genuine transaction of each shape of kinds (every
// shape, Kinds, when none is named) on the pair (the templates), recording
// the act documents their evaluators read, and returns the source of
// histories for it: Generate copies those shapes. The pair is recordtest's
// walkthrough: b the buyer, s the supplier.
func Trade(t testing.TB, b, s *recordtest.Side, c *recordtest.Clock, kinds ...Kind) *Source {
	t.Helper()
	ctx := context.Background()
	var recs []*acts
	for _, sd := range []*recordtest.Side{b, s} {
		ev := sd.Node.Org.Evaluator()
		r := &acts{docs: map[string][]byte{}, inner: ev.Policy}
		ev.Policy = r
		recs = append(recs, r)
	}
	if len(kinds) == 0 {
		kinds = Kinds
	}
	txns := map[Kind]string{}
	issue := func(txn string) {
		if out, err := b.Engine.IssueObligation(ctx, b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn}); err != nil || out.State != "in_performance" {
			t.Fatalf("issue: %+v %v", out, err)
		}
	}
	for _, k := range kinds {
		switch k {
		case Completed:
			txns[k] = recordtest.Form(t, b, s, "3200.00")
			recordtest.Complete(t, b, s, txns[k])
		case Committed:
			txns[k] = recordtest.Form(t, b, s, "3200.00")
		case InPerformance:
			txns[k] = recordtest.Form(t, b, s, "2800.00")
			issue(txns[k])
		case OpenOffer:
			txns[k] = recordtest.Offer(t, s, "1500.00").TransactionID
		case Disputed:
			txns[k] = recordtest.Form(t, b, s, "3600.00")
			recordtest.Dispute(t, b, s, c, txns[k])
		case Terminated:
			txns[k] = recordtest.Form(t, b, s, "900.00")
			issue(txns[k])
			if out, err := b.Engine.ProposeTermination(ctx, b.Actor(), record.TerminationInput{MandateID: b.Mandate, TransactionID: txns[k]}); err != nil || out.Status != record.StatusDelivered {
				t.Fatalf("propose termination: %+v %v", out, err)
			}
			if out, err := s.Engine.AgreeTermination(ctx, s.Actor(), record.TerminationInput{MandateID: s.Mandate, TransactionID: txns[k]}); err != nil || out.State != "terminated" {
				t.Fatalf("agree termination: %+v %v", out, err)
			}
		default:
			t.Fatalf("history: no shape %q", k)
		}
	}
	recordtest.Flush(ctx, b, s)
	docs := map[string][]byte{}
	for i, sd := range []*recordtest.Side{b, s} {
		sd.Node.Org.Evaluator().Policy = recs[i].inner
		for h, d := range recs[i].docs {
			docs[h] = d
		}
	}
	src := &Source{stores: [2]*store.Store{b.Node.Org.Store, s.Node.Org.Store}, signers: map[string]signature.Signer{}, templates: map[Kind]*template{}}
	for _, sd := range []*recordtest.Side{b, s} {
		as, err := sd.Node.Org.AgentSigner()
		if err != nil {
			t.Fatal(err)
		}
		src.signers[as.KeyID()] = as
		cfg, err := instance.LoadConfig(sd.Node.Dir)
		if err != nil {
			t.Fatal(err)
		}
		k, err := keys.ReadPrivateFile(filepath.Join(sd.Node.Dir, instance.PrincipalKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		ps, err := signature.NewSigner(cfg.PrincipalKeyID, k)
		if err != nil {
			t.Fatal(err)
		}
		src.signers[ps.KeyID()] = ps
	}
	for _, k := range kinds {
		tp, err := newTemplate(ctx, k, txns[k], src.stores, docs)
		if err != nil {
			t.Fatalf("template %s: %v", k, err)
		}
		src.templates[k] = tp
	}
	return src
}

// Template returns the id of kind's template transaction ("" when none
// was traded).
func (src *Source) Template(kind Kind) string {
	if tp := src.templates[kind]; tp != nil {
		return tp.txn
	}
	return ""
}

// BuyerOnly is a source whose Generate writes the buyer's store only:
// the buyer holds the history and the supplier only the templates, as an
// organisation that trades with many counterparties holds far more than
// any one of them. It is what a history too large for one disk to hold
// twice is made with (BenchmarkHistory's -history.buyer-only). A
// supplier's copy of the buyer's transactions is not needed to read or
// verify the buyer's record; the supplier cannot act on them.
func (src *Source) BuyerOnly() *Source {
	only := *src
	only.stores[1] = nil
	return &only
}

// Txn is one generated transaction.
type Txn struct {
	ID   string
	Kind Kind
}

// chunk is how many transactions one database transaction of each side
// writes.
const chunk = 250

// batch is a chunk's rows, made by a worker, written by Generate.
type batch struct {
	txns []Txn
	rows [2][]store.Rows
	err  error
}

// Generate writes n transactions shaped as mix says into both sides'
// stores (the buyer's only, from BuyerOnly), copies of the templates
// under fresh identifiers (see the package comment), and returns them in
// the order of the mix. The copies are made
// on every processor; each side's rows are written a chunk to one
// database transaction. On an error, the chunks written before it stay
// (Generate returns the transactions they hold), and the chunk it failed
// in may have been written on one side only: a history that failed is
// for throwing away.
func (src *Source) Generate(ctx context.Context, n int, mix Mix) ([]Txn, error) {
	seq := mix.sequence()
	if len(seq) == 0 {
		return nil, fmt.Errorf("history: an empty mix")
	}
	for _, s := range mix {
		if src.templates[s.Kind] == nil {
			return nil, fmt.Errorf("history: no template of kind %q", s.Kind)
		}
	}
	chunks := (n + chunk - 1) / chunk
	jobs := make(chan int)
	results := make([]chan batch, chunks)
	for i := range results {
		results[i] = make(chan batch, 1)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// On the way out, an error or not, the workers stop before Generate
	// returns.
	defer func() { cancel(); wg.Wait() }()
	workers := runtime.GOMAXPROCS(0)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seed [32]byte
			crand.Read(seed[:])
			rng := rand.NewChaCha8(seed)
			var raw [12]byte
			fresh := func(prefix string) string {
				rng.Read(raw[:])
				return prefix + "_" + hex.EncodeToString(raw[:])
			}
			for c := range jobs {
				if err := ctx.Err(); err != nil {
					results[c] <- batch{err: err}
					continue
				}
				results[c] <- src.batch(c*chunk, min(n, (c+1)*chunk), n, seq, fresh)
			}
		}()
	}
	// At most two chunks a worker are made and not yet written: the
	// history is not held in memory whole, however long it is.
	inflight := make(chan struct{}, 2*workers)
	go func() {
		defer close(jobs)
		for c := range chunks {
			select {
			case inflight <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	var out []Txn
	for c := range chunks {
		var bt batch
		select {
		case bt = <-results[c]:
		case <-ctx.Done():
			return out, ctx.Err()
		}
		if bt.err != nil {
			return out, bt.err
		}
		var errs [2]error
		var w sync.WaitGroup
		for i, st := range src.stores {
			if st == nil {
				continue // BuyerOnly
			}
			w.Add(1)
			go func() {
				defer w.Done()
				errs[i] = st.Update(ctx, func(tx *store.Txn) error {
					for _, r := range bt.rows[i] {
						if err := tx.InsertRows(r); err != nil {
							return err
						}
					}
					return nil
				})
			}()
		}
		w.Wait()
		for _, err := range errs {
			if err != nil {
				return out, err
			}
		}
		out = append(out, bt.txns...)
		<-inflight
	}
	return out, nil
}

// batch makes the copies from to to of a history of n.
func (src *Source) batch(from, to, n int, seq []Kind, fresh func(string) string) batch {
	var bt batch
	var tables [2]map[string]*store.Rows
	var order [2][]string
	for i := range tables {
		tables[i] = map[string]*store.Rows{}
	}
	for i := from; i < to; i++ {
		k := seq[i%len(seq)]
		// Copy i was last updated (n-i) µs before its template: each
		// transaction has a time of its own, as traded ones do, the
		// history in the order generated and older than the templates.
		id, rows, err := src.clone(src.templates[k], fresh, -time.Duration(n-i)*time.Microsecond)
		if err != nil {
			bt.err = err
			return bt
		}
		bt.txns = append(bt.txns, Txn{ID: id, Kind: k})
		for side := range rows {
			for _, r := range rows[side] {
				t := tables[side][r.Table]
				if t == nil {
					t = &store.Rows{Table: r.Table, Columns: r.Columns}
					tables[side][r.Table] = t
					order[side] = append(order[side], r.Table)
				}
				t.Values = append(t.Values, r.Values...)
			}
		}
	}
	// The tables in the order TransactionRows reads them (the
	// transaction, then its objects, then its events...), whichever
	// template came first.
	for side := range tables {
		for _, name := range tableOrder {
			if t := tables[side][name]; t != nil {
				bt.rows[side] = append(bt.rows[side], *t)
			}
		}
		if len(bt.rows[side]) != len(order[side]) {
			bt.err = fmt.Errorf("history: rows of a table not in the order known: %v", order[side])
		}
	}
	return bt
}

// tableOrder is store.TransactionRows's order of tables.
var tableOrder = []string{"transactions", "objects", "events", "obligation_states", "settlements", "spend", "spend_payments", "approval_requests", "withdrawals", "inbox", "alerts"}

// rowTime is the form of the transactions table's times (store.now).
const rowTime = "2006-01-02T15:04:05.000000000Z"

// clone makes one copy of tp: its transaction id and each side's rows,
// the transaction's created_at and updated_at shifted by shift.
func (src *Source) clone(tp *template, fresh func(string) string, shift time.Duration) (string, [2][]store.Rows, error) {
	var out [2][]store.Rows
	ids := make(map[string]string, len(tp.ids))
	for id := range tp.ids {
		ids[id] = fresh(id[:strings.LastIndexByte(id, '_')])
	}
	idf := func(s string) string {
		if n, ok := ids[s]; ok {
			return n
		}
		return s
	}
	txn := ids[tp.txn]
	hashes := make(map[string]string, len(tp.objs)+len(tp.acts))
	bodies := make(map[string][]byte, len(tp.objs))
	var subst func(v any, key string, self *tobj) (any, error)
	actHash := func(h string) (string, error) {
		if n, ok := hashes[h]; ok {
			return n, nil
		}
		doc, err := subst(tp.acts[h], "", nil)
		if err != nil {
			return "", err
		}
		n, err := canonical.Hash(doc)
		if err != nil {
			return "", err
		}
		hashes[h] = n
		return n, nil
	}
	hashOf := func(s, key string, self *tobj) (string, error) {
		if n, ok := hashes[s]; ok {
			return n, nil
		}
		if tp.byHash[s] != nil {
			return "", fmt.Errorf("history: %s names %s before it is made", self.id, tp.byHash[s].id)
		}
		if tp.acts[s] != nil {
			return actHash(s)
		}
		if r, ok := tp.terminations[s]; ok {
			prev := hashes[r.previous]
			if prev == "" {
				return "", fmt.Errorf("history: %s names a termination record before the event it follows is made", self.id)
			}
			open := make([]string, len(r.open))
			for i, id := range r.open {
				open[i] = idf(id)
			}
			n, err := verify.TerminationRecordHash(txn, idf(r.agreement), prev, open)
			if err != nil {
				return "", err
			}
			hashes[s] = n
			return n, nil
		}
		switch key {
		case "audit_bundle_hash":
			chain := make([]string, self.seq-1)
			for i, h := range tp.chain[:self.seq-1] {
				if chain[i] = hashes[h]; chain[i] == "" {
					return "", fmt.Errorf("history: event %d is not made before %s", i+1, self.id)
				}
			}
			return auditBundleHash(txn, chain)
		case "mapping_report_hash":
			return tp.mappingReportHash(self.val, idf)
		}
		return s, nil
	}
	subst = func(v any, key string, self *tobj) (any, error) {
		switch x := v.(type) {
		case string:
			if isHash(x) {
				return hashOf(x, key, self)
			}
			return replaceIDs(x, idf), nil
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, y := range x {
				n, err := subst(y, k, self)
				if err != nil {
					return nil, err
				}
				m[k] = n
			}
			return m, nil
		case []any:
			a := make([]any, len(x))
			for i, y := range x {
				n, err := subst(y, key, self)
				if err != nil {
					return nil, err
				}
				a[i] = n
			}
			return a, nil
		}
		return v, nil
	}
	// Each object's bytes are the template's with every value to replace
	// replaced in place (tobj.compile): its hash input first, whose hash
	// is its new content_hash and over which its signatures are made
	// again, then its stored bytes.
	for _, o := range tp.objs {
		fill := func(dst []byte, p patch, v string) error {
			if len(v) != p.end-p.off {
				return fmt.Errorf("history: %s: %q does not replace %q in place", o.id, v, p.old)
			}
			copy(dst[p.off:p.end], v)
			return nil
		}
		value := func(p patch) (string, error) {
			if p.kind == patchID {
				return ids[p.old], nil
			}
			return hashOf(p.old, o.keyOf[p.old], o)
		}
		in := append([]byte(nil), o.in...)
		for _, p := range o.inPatches {
			v, err := value(p)
			if err == nil {
				err = fill(in, p, v)
			}
			if err != nil {
				return "", out, err
			}
		}
		h := canonical.SHA256Hex(in)
		sigs := make([]string, len(o.sigs))
		for k, sg := range o.sigs {
			s := src.signers[sg.keyID]
			if s == nil {
				return "", out, fmt.Errorf("history: no signer for key %s, which signs %s", sg.keyID, o.id)
			}
			e, err := signature.EntryOver(o.typ, in, s, sg.purpose, sg.at)
			if err != nil {
				return "", out, err
			}
			sigs[k] = str(e["signature"])
		}
		body := append([]byte(nil), o.body...)
		for _, p := range o.bodyPatches {
			var v string
			var err error
			switch p.kind {
			case patchSelf:
				v = h
			case patchSig:
				v = sigs[p.sig]
			default:
				v, err = value(p)
			}
			if err == nil {
				err = fill(body, p, v)
			}
			if err != nil {
				return "", out, err
			}
		}
		hashes[o.hash] = h
		bodies[o.id] = body
	}
	for side, rows := range tp.rows {
		if src.stores[side] == nil {
			continue // BuyerOnly: no rows for a side that is not written
		}
		for _, r := range rows {
			col := colIndex(r.Columns)
			n := store.Rows{Table: r.Table, Columns: r.Columns, Values: make([][]any, len(r.Values))}
			for j, v := range r.Values {
				nv := make([]any, len(v))
				for i, c := range r.Columns {
					switch x := v[i].(type) {
					case string:
						switch {
						case r.Table == "transactions" && (c == "created_at" || c == "updated_at"):
							at, err := time.Parse(rowTime, x)
							if err != nil {
								return "", out, fmt.Errorf("history: %s %s: %w", c, x, err)
							}
							nv[i] = at.Add(shift).Format(rowTime)
						case !isHash(x):
							nv[i] = replaceIDs(x, idf)
						case hashes[x] != "":
							nv[i] = hashes[x]
						case tp.acts[x] != nil:
							h, err := actHash(x)
							if err != nil {
								return "", out, err
							}
							nv[i] = h
						case r.Table == "inbox" && c == "message_key":
							h := sha256.Sum256([]byte(x + "\x00" + txn))
							nv[i] = hex.EncodeToString(h[:])
						case r.Table == "settlements" && c == "fingerprint":
							nv[i] = tp.fingerprint(v[col["instruction_id"]].(string), idf)
						default:
							return "", out, fmt.Errorf("history: %s.%s holds hash %s, unknown", r.Table, c, x)
						}
					case []byte:
						if r.Table == "objects" && c == "body" {
							nv[i] = bodies[v[col["id"]].(string)]
						} else {
							nv[i] = []byte(replaceIDs(string(x), idf))
						}
					default:
						nv[i] = x
					}
				}
				n.Values[j] = nv
			}
			out[side] = append(out[side], n)
		}
	}
	return txn, out, nil
}
