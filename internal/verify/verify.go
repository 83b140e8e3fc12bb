package verify

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/partyd/party/internal/bundle"
	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/protocol"
	"github.com/partyd/party/internal/reason"
	"github.com/partyd/party/internal/rules"
	"github.com/partyd/party/internal/signature"
)

// Input is what a verifier holds: the objects, the mandates and the keys a
// bundle declares. Nothing else is consulted: no network, no database, no
// status endpoint.
type Input struct {
	// Objects are the envelope objects, key_records included, each decoded
	// strictly from the bytes as held (canonical.Decode). They are read,
	// never modified.
	Objects []map[string]any
	// Mandates are the standalone a202-mandate/0.1 documents.
	Mandates []map[string]any
	// Keys are the declared public keys (keys.json). Nil means the bundle
	// declares none: every signature is then not_checkable, never verified.
	Keys *keys.KeySet
	// TransactionID is the transaction the bundle says it is about, if it
	// says; it is reported in the scope.
	TransactionID string
	// Disclosure is what the discloser states about what it left out
	// (evidence verification §6), or nil when it states nothing, as a
	// bundle directory does not. When stated, the disclosed subset must
	// verify without anything withheld beyond the stated gaps: a response
	// whose assertion, or a determination whose dispute, is neither held
	// nor a stated gap fails A202-EVIDENCE-DISCLOSURE-INCOMPLETE, and a
	// dispute whose subject hash resolves to nothing held, withheld or
	// stated resolvable fails A202-DISPUTE-SUBJECT-UNREFERENCED. When nil,
	// such an absence is not_checkable: nobody said whether it was
	// withheld. A stated disclosure with no gaps says nothing was. A
	// bundle directory states it in bundle.json (stated_gaps,
	// resolvable_hashes; see BundleInput), or does not.
	Disclosure *Disclosure
	// StatedReport, when not nil, is a verification report the record
	// carries (as a bundle fixture's context does): it is judged as a
	// report (evidence verification §5, §6 rule 2; gate.CheckReport), and
	// each fault is A202-EVIDENCE-REPORT-INVALID. It is never taken as
	// evidence that anything in the bundle verified.
	StatedReport any

	// checked names objects and mandates whose signatures the caller
	// verified when it stored them (Extend's held working set): their
	// entries are prechecked as any other, and their values taken as
	// verified instead of being verified again.
	checked map[string]bool
}

// Disclosure is a discloser's statement about a selective disclosure
// (evidence verification §6), as a bundle fixture's context states it.
type Disclosure struct {
	// StatedGaps are the ids of objects the discloser knowingly withheld:
	// a reference to one is a stated boundary, not_checkable, never a
	// failure.
	StatedGaps []string
	// ResolvableHashes are content hashes the discloser states resolve
	// outside the bundle.
	ResolvableHashes []string
}

// Options adjust a verification run.
type Options struct {
	// RulesVersion is the rules version in force when the record's events
	// appended (bundle.json, or a caller's override). Empty means nobody
	// stated one: every transition is then not_checkable.
	RulesVersion string
	// EventRules states the rules version in force for particular events,
	// by event id, where it differs from RulesVersion.
	EventRules map[string]string
	// Now is the verification time, against which current key status is
	// read. The zero value means time.Now().
	Now time.Time
	// SingleSignedEvents accepts transaction events that carry only the
	// appender's signature, as every published fixture does (spec-map §14
	// C5). Without it an event needs the peer's countersignature as well
	// (pilot state machine §8.1; decisions.md item 10).
	SingleSignedEvents bool
	// Workers bounds the goroutines that hash objects and verify
	// signatures; 0 means GOMAXPROCS.
	Workers int
	// CountVerified keeps the report's list to the checks that failed or
	// could not be run; those that passed are counted in Results and not
	// listed. It is what a summary needs (party verify without --json):
	// on a 5 000-event record the passed checks are some 140 000 entries,
	// a fifth of the run's heap, which the collector would scan again and
	// again for a report that prints only their number.
	CountVerified bool
	// Memo, when set, is the caller's memory of the ES256 signatures it
	// accepted (signature.Memo): a signature found there is not verified
	// again, and one verified here is added. An instance's engine hands
	// its own; party verify none.
	Memo *signature.Memo

	// awaiting names the new objects Extend checks before this party
	// signs them: an event's countersignature, or an agreement's second
	// party signature, is not asked of them.
	awaiting map[string]bool
}

// Verify runs the seven steps of evidence verification §4 over in and
// returns the report. It never fails as a function: whatever the input, it
// returns a report, and everything it could not do is a not_checkable
// check in it. It is safe to call concurrently.
func Verify(in Input, opt Options) *Report {
	r := newRun(in, opt)
	r.prepare()
	r.step1()
	r.step2()
	r.step3()
	r.step4()
	r.step5()
	r.step6()
	r.step7()
	rep := r.report()
	rep.Ledger = r.ledgers()
	return rep
}

// object is one envelope object and what the parallel phase learnt of it.
type object struct {
	pos     int
	val     map[string]any
	id      string
	typ     protocol.ObjectType
	subject string
	payload map[string]any

	declared    string // declared content_hash ("" if absent or not a string)
	recomputed  string // SHA-256 of the hash input ("" if it has none)
	hashErr     error
	sigs        []sigCheck
	sigsInvalid string // why the signatures member is unusable, if it is
}

// hashOK reports whether the object's bytes hash to its declared hash.
func (o *object) hashOK() bool {
	return o.hashErr == nil && o.declared != "" && o.declared == o.recomputed
}

// sigCheck is the outcome of verifying one signature entry.
type sigCheck struct {
	keyID, purpose, signedAt string
	result                   Result
	detail                   string
	keyMissing               bool // the key_id is not among the declared keys (or none are)
}

// mandate is one standalone mandate and its proof's outcome.
type mandate struct {
	pos   int
	val   map[string]any
	id    string
	proof sigCheck
}

type run struct {
	in  Input
	opt Options
	now time.Time

	objs       []*object
	byID       map[string]*object
	byHash     map[string]*object // by recomputed content hash
	byDeclared map[string]*object // by declared content hash
	clashes    []*object          // objects whose id an earlier, different object took
	mandates   []*mandate
	mandateBy  map[string]*mandate
	keyChains  map[string]*keyChain
	keyRecs    []*object        // the key_records, for the chains
	keyVals    []map[string]any // their values
	streams    []*stream
	streamBy   map[string]*stream

	revocations []*object            // the revocation_records, looked at for every event
	parties     map[string][2]string // transaction → its two parties, as the bundle names them

	forked bool // a fork reads the shared caches and never writes them

	checks       []Check
	verified     int // passed checks counted, not listed (Options.CountVerified)
	unresolved   map[string]bool
	undisclosed  map[string]bool
	unregistered map[string]bool
	referenced   map[string]bool // evidence ids some object references
	details      *detailTable    // this run's or fork's own (costs.go)
	valid        *validDetails   // shared by the run and its forks (costs.go)
}

func newRun(in Input, opt Options) *run {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	return &run{
		in: in, opt: opt, now: now.UTC(),
		byID: map[string]*object{}, byHash: map[string]*object{}, byDeclared: map[string]*object{},
		mandateBy: map[string]*mandate{}, keyChains: map[string]*keyChain{}, streamBy: map[string]*stream{},
		parties:    map[string][2]string{},
		unresolved: map[string]bool{}, undisclosed: map[string]bool{}, unregistered: map[string]bool{},
		referenced: map[string]bool{},
		valid:      &validDetails{m: map[[2]string]string{}},
	}
}

func (r *run) add(step int, name, subject string, res Result, code reason.Code, detail string) {
	if res != Failed {
		code = ""
	} else if code == "" {
		// A failure always names what failed; a check without a code of its
		// own is never allowed to fail silently.
		panic(fmt.Sprintf("verify: failed check %s on %s without a code", name, subject))
	}
	if res == Verified && r.opt.CountVerified {
		r.verified++
		return
	}
	r.checks = append(r.checks, Check{Step: step, Name: name, Subject: subject, Result: res, Code: code, Detail: r.dedupe(detail)})
}

func (r *run) missing(id string) {
	if id == "" {
		return
	}
	if r.unresolved == nil {
		r.unresolved = map[string]bool{}
	}
	r.unresolved[id] = true
}

// prepare indexes the input and runs the parallel phase: every object's
// content hash and every signature, and every mandate proof. These are the
// expensive parts, independent of one another; everything after them reads
// their results in a fixed order, so the report does not depend on how the
// work was scheduled.
func (r *run) prepare() {
	first := make(map[string]map[string]any, len(r.in.Objects))
	r.byID = make(map[string]*object, len(r.in.Objects))
	r.byHash = make(map[string]*object, len(r.in.Objects))
	for i, v := range r.in.Objects {
		if v == nil {
			continue
		}
		o := &object{pos: i, val: v}
		o.id, _ = strAt(v, "id")
		o.typ = objectType(v)
		o.payload, _ = objAt(v, "payload")
		o.subject = o.id
		if o.subject == "" {
			o.subject = fmt.Sprintf("objects[%d]", i)
		}
		if o.id != "" {
			if prev, dup := first[o.id]; dup {
				if sameDocument(prev, v) {
					continue // the same object held twice is one object
				}
				r.clashes = append(r.clashes, o)
			} else {
				first[o.id] = v
			}
		}
		r.objs = append(r.objs, o)
	}
	for i, v := range r.in.Mandates {
		if v == nil {
			continue
		}
		m := &mandate{pos: i, val: v}
		m.id, _ = strAt(v, "id")
		if m.id == "" {
			m.id = fmt.Sprintf("mandates[%d]", i)
		}
		if _, dup := r.mandateBy[m.id]; dup {
			continue
		}
		r.mandateBy[m.id] = m
		r.mandates = append(r.mandates, m)
	}

	r.parallel(len(r.objs)+len(r.mandates), func(_, i int) {
		if i < len(r.objs) {
			r.examine(r.objs[i])
		} else {
			r.examineMandate(r.mandates[i-len(r.objs)])
		}
	})

	// The report's list is made once the signatures are verified, so that
	// it is not part of the heap through the long parallel phase.
	if !r.opt.CountVerified {
		r.checks = make([]Check, 0, expectedChecks(len(r.objs)+len(r.mandates)))
	}
	for _, o := range r.objs {
		if o.id != "" {
			if _, taken := r.byID[o.id]; !taken {
				r.byID[o.id] = o
			}
		}
		if o.recomputed != "" {
			if _, taken := r.byHash[o.recomputed]; !taken {
				r.byHash[o.recomputed] = o
			}
		}
		// byDeclared is asked only about a hash no object's bytes have
		// (byHash first), so it needs only the objects that declare
		// another hash than theirs.
		if o.declared != "" && o.declared != o.recomputed {
			if _, taken := r.byDeclared[o.declared]; !taken {
				r.byDeclared[o.declared] = o
			}
		}
		if o.typ == protocol.RevocationRecord {
			r.revocations = append(r.revocations, o)
		}
	}
	// The two parties of each transaction, from its first agreement, else
	// its first offer: what a mandate's counterparty scope is read against.
	for _, typ := range []protocol.ObjectType{protocol.Agreement, protocol.Offer} {
		a, b := "buyer", "supplier"
		if typ == protocol.Offer {
			a, b = "offeror", "offeree"
		}
		for _, o := range r.objs {
			txn := str(o.val, "transaction_id")
			if _, known := r.parties[txn]; o.typ == typ && !known && txn != "" {
				r.parties[txn] = [2]string{partyOrg(o.payload, a), partyOrg(o.payload, b)}
			}
		}
	}
}

// fork returns a copy of r for checks run concurrently with others: it
// shares everything read-only and has its own checks, unresolved set and
// key chain cache. join appends what a fork found, so a caller that joins
// forks in a fixed order gets a report independent of scheduling.
func (r *run) fork() *run {
	c := *r
	c.checks = nil
	c.verified = 0
	c.unresolved = nil // made on first use: most forks find nothing missing
	c.details = nil
	c.forked = true
	return &c
}

// forEach runs f over n items on forks of r, in parallel, and joins what
// they found in item order (items.go).
func (r *run) forEach(n int, f func(c *run, i int)) {
	it := r.newItems(n, r.workers(n))
	r.parallel(n, func(w, i int) { it.do(w, i, func(c *run) { f(c, i) }) })
	r.joinItems(it)
}

// sameDocument reports whether a and b have the same canonical form. It is
// asked only when an id repeats, which a sound bundle never does.
func sameDocument(a, b map[string]any) bool {
	x, err1 := canonical.Marshal(a)
	y, err2 := canonical.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// examine computes o's content hash and verifies each of its signatures.
// It writes only to o.
func (r *run) examine(o *object) {
	o.declared, _ = strAt(o.val, "content_hash")
	var in []byte
	if r.in.checked[o.id] && o.declared != "" {
		// Held by the caller, who recomputed its hash when it stored it.
		o.recomputed = o.declared
	} else {
		var release func()
		in, release = hashInput(o)
		defer release()
	}
	var list []any
	switch v := o.val["signatures"].(type) {
	case nil:
		if _, present := o.val["signatures"]; present {
			o.sigsInvalid = "signatures is null, not an array"
		}
	case []any:
		list = v
	default:
		o.sigsInvalid = "signatures is not an array"
	}
	o.sigs = make([]sigCheck, len(list))
	pubs := make([]crypto.PublicKey, len(list))
	pending := 0
	for i, e := range list {
		o.sigs[i], pubs[i] = r.precheck(o, e)
		if o.sigs[i].result == "" {
			pending++
		}
	}
	if pending == 0 {
		return
	}
	if r.in.checked[o.id] {
		for i := range o.sigs {
			if o.sigs[i].result == "" {
				o.sigs[i].result, o.sigs[i].detail = Verified, validDetail(o.sigs[i])+" (verified when it was stored)"
			}
		}
		return
	}
	// The common case, every entry checkable and valid, costs one hash
	// input for all of them; anything else is attributed entry by entry.
	if pending == len(list) && r.allVerify(o, in) {
		for i := range o.sigs {
			o.sigs[i].result, o.sigs[i].detail = Verified, r.valid.detail(o.sigs[i])
		}
		return
	}
	for i := range o.sigs {
		if o.sigs[i].result == "" {
			o.sigs[i] = settle(o.sigs[i], verifyEntry(r.opt.Memo, o, in, i, pubs[i]), r.valid.detail(o.sigs[i]))
		}
	}
}

// verifyEntry is signature.VerifyEntry over the hash input examine
// computed, when it could compute one: the object is not encoded again
// for each entry.
func verifyEntry(memo *signature.Memo, o *object, in []byte, i int, pub crypto.PublicKey) error {
	if o.hashErr != nil {
		in = nil // partial bytes: VerifyEntryOver computes them, and refuses
	}
	return memo.VerifyEntryOver(o.val, in, i, pub)
}

func validDetail(sc sigCheck) string {
	return "valid over the canonical bytes under " + sc.keyID + " for " + sc.purpose
}

// entryMembers are the five members of a signature entry (kernel schema
// $defs/signature, a closed shape).
var entryMembers = []string{"key_id", "algorithm", "signature", "signed_at", "purpose"}

// precheck does what can be decided about a signature entry before its
// value is verified: its shape, its purpose (which needs no key), the
// fixtures' placeholder, and the key it names. An entry left with no
// result is ready to verify under the returned key.
func (r *run) precheck(o *object, e any) (sigCheck, crypto.PublicKey) {
	m, ok := e.(map[string]any)
	if !ok {
		return sigCheck{result: Failed, detail: "the signature entry is not an object"}, nil
	}
	sc := sigCheck{keyID: str(m, "key_id"), purpose: str(m, "purpose"), signedAt: str(m, "signed_at")}
	for k := range m {
		if !contains(entryMembers, k) {
			sc.result, sc.detail = Failed, fmt.Sprintf("the entry has member %q, outside a signature entry", k)
			return sc, nil
		}
	}
	for _, k := range entryMembers {
		if _, ok := m[k].(string); !ok {
			sc.result, sc.detail = Failed, fmt.Sprintf("the entry's %s is missing or not a string", k)
			return sc, nil
		}
	}
	if allowed := purposesRefusing(string(o.typ), sc.purpose); allowed != nil {
		// A signature valid over the bytes but issued for another act does
		// not count for this one (§4 step 2 item 2), whatever its value.
		sc.result, sc.detail = Failed, fmt.Sprintf("purpose %q may not sign a %s (allowed: %v)", sc.purpose, o.typ, allowed)
		return sc, nil
	}
	if m["signature"] == signature.Placeholder {
		sc.result, sc.detail = NotCheckable, "the value is the published fixtures' placeholder, not a signature"
		return sc, nil
	}
	if r.in.Keys == nil {
		sc.result, sc.detail, sc.keyMissing = NotCheckable, "the bundle declares no keys, so the value cannot be checked", true
		return sc, nil
	}
	pub, err := r.in.Keys.Lookup(sc.keyID)
	if err != nil {
		sc.result, sc.detail, sc.keyMissing = NotCheckable, fmt.Sprintf("key %s is not among the declared keys", sc.keyID), true
		return sc, nil
	}
	return sc, pub
}

// settle turns a verification error into an outcome: a refusal is a
// failure, ErrNotCheckable a gap, nil a pass.
func settle(sc sigCheck, err error, ok string) sigCheck {
	var refusal *reason.Refusal
	switch {
	case err == nil:
		sc.result, sc.detail = Verified, ok
	case errors.Is(err, signature.ErrNotCheckable):
		sc.result, sc.detail = NotCheckable, err.Error()
	case errors.As(err, &refusal):
		sc.result, sc.detail = Failed, refusal.Detail
	default:
		sc.result, sc.detail = Failed, err.Error()
	}
	return sc
}

// examineMandate verifies the mandate's proof under the issuer key it names.
func (r *run) examineMandate(m *mandate) {
	proof, ok := objAt(m.val, "proof")
	if !ok {
		m.proof = sigCheck{result: Failed, detail: "the mandate carries no proof object"}
		return
	}
	m.proof = sigCheck{keyID: str(proof, "key_id"), purpose: str(proof, "purpose"), signedAt: str(proof, "created_at")}
	if proof["signature"] == signature.Placeholder {
		m.proof.result, m.proof.detail = NotCheckable, "the proof value is the published fixtures' placeholder, not a signature"
		return
	}
	if r.in.Keys == nil {
		m.proof.result, m.proof.detail, m.proof.keyMissing = NotCheckable, "the bundle declares no keys, so the proof cannot be checked", true
		return
	}
	pub, err := r.in.Keys.Lookup(m.proof.keyID)
	if err != nil {
		m.proof.result, m.proof.detail, m.proof.keyMissing = NotCheckable, fmt.Sprintf("issuer key %s is not among the declared keys", m.proof.keyID), true
		return
	}
	if r.in.checked[m.id] {
		m.proof.result, m.proof.detail = Verified, fmt.Sprintf("valid under issuer key %s (verified when it was stored)", m.proof.keyID)
		return
	}
	m.proof = settle(m.proof, signature.VerifyMandateProof(m.val, pub), fmt.Sprintf("valid under issuer key %s", m.proof.keyID))
}

// rulesFor returns the rules version in force for an event.
func (r *run) rulesFor(eventID string) string {
	if v, ok := r.opt.EventRules[eventID]; ok {
		return v
	}
	return r.opt.RulesVersion
}

// report assembles the final report.
func (r *run) report() *Report {
	rep := &Report{
		RoleScope:    RoleScope,
		RulesVersion: r.opt.RulesVersion,
		VerifiedAt:   envelope.Timestamp(r.now),
		Checks:       r.checks,
	}
	if rep.Checks == nil {
		rep.Checks = []Check{}
	}
	rep.Scope.TransactionID = r.in.TransactionID
	rep.Scope.Objects = []string{}
	seen := make(map[string]bool, len(r.objs))
	var first, last time.Time
	note := func(t time.Time, ok bool) {
		if !ok {
			return
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if last.IsZero() || t.After(last) {
			last = t
		}
	}
	for _, o := range r.objs {
		if !seen[o.subject] {
			seen[o.subject] = true
			rep.Scope.Objects = append(rep.Scope.Objects, o.subject)
		}
		note(timeAt(o.val, "created_at"))
		if o.typ == protocol.TransactionEvent {
			note(timeAt(o.payload, "occurred_at"))
		}
	}
	sort.Strings(rep.Scope.Objects)
	rep.Scope.Mandates = []string{}
	for _, m := range r.mandates {
		rep.Scope.Mandates = append(rep.Scope.Mandates, m.id)
		proof, _ := objAt(m.val, "proof")
		note(timeAt(proof, "created_at")) // when it was issued, not the span it grants
	}
	sort.Strings(rep.Scope.Mandates)
	if !first.IsZero() {
		rep.Scope.TimeRange = &TimeRange{From: envelope.Timestamp(first), To: envelope.Timestamp(last)}
	}
	rep.Scope.StreamsDisclosed = []string{}
	for _, s := range r.streams {
		rep.Scope.StreamsDisclosed = append(rep.Scope.StreamsDisclosed, s.key)
	}
	sort.Strings(rep.Scope.StreamsDisclosed)

	rep.Results.Verified = r.verified
	rep.Raised = []Raised{}
	raised := map[Raised]bool{}
	for _, c := range rep.Checks {
		switch c.Result {
		case Verified:
			rep.Results.Verified++
		case Failed:
			rep.Results.Failed++
			k := Raised{Code: c.Code, Subject: c.Subject}
			if !raised[k] {
				raised[k] = true
				rep.Raised = append(rep.Raised, k)
			}
		case NotCheckable:
			rep.Results.NotCheckable++
		}
	}
	rep.UndisclosedStreams = sortedSet(r.undisclosed)
	rep.UnresolvedReferences = sortedSet(r.unresolved)
	rep.UnregisteredTypes = sortedSet(r.unregistered)
	rep.UnreferencedEvidence = []string{}
	for _, o := range r.objs {
		if o.typ == protocol.Evidence && o.id != "" && !r.referenced[o.id] && !contains(rep.UnreferencedEvidence, o.id) {
			rep.UnreferencedEvidence = append(rep.UnreferencedEvidence, o.id)
		}
	}
	sort.Strings(rep.UnreferencedEvidence)
	return rep
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// knownRules reports whether version names a registered rules version.
func knownRules(version string) bool { return rules.Known(version) }

// VerifyDir verifies the bundle in directory dir as a third party does:
// it reads the bundle (bundle.Read) and runs [Verify] over its
// [BundleInput], under the rules version opt names or, when opt names
// none, the one bundle.json states. The error is only ever about reading:
// a bundle that is not one, or a file that does not decode strictly
// (refused whole, since a partly read bundle would pass off a broken
// file as a gap). Once read, a bundle is always verified and reported.
func VerifyDir(dir string, opt Options) (*Report, error) {
	b, err := bundle.Read(dir)
	if err != nil {
		return nil, err
	}
	if opt.RulesVersion == "" {
		opt.RulesVersion = b.Manifest.RulesVersion
	}
	return Verify(BundleInput(b), opt), nil
}

// BundleInput is the input a bundle directory gives: its objects,
// mandates and keys, the transaction bundle.json names and, when
// bundle.json states one (stated_gaps or resolvable_hashes), the
// discloser's statement about what it withheld. A bundle.json that states
// none leaves Disclosure nil: an absence is then a gap, not a failure.
func BundleInput(b *bundle.Bundle) Input {
	in := Input{
		Objects:       b.ObjectValues(),
		Mandates:      b.MandateValues(),
		Keys:          b.Keys,
		TransactionID: b.Manifest.TransactionID,
	}
	if b.Manifest.StatesDisclosure() {
		in.Disclosure = &Disclosure{
			StatedGaps:       append([]string(nil), b.Manifest.StatedGaps...),
			ResolvableHashes: append([]string(nil), b.Manifest.ResolvableHashes...),
		}
	}
	return in
}
