package record_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/delivery"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/record"
	"github.com/partyd/party/internal/recordtest"
	"github.com/partyd/party/internal/signature"
)

// The countersigning property: a countersigner signs only what its own
// verifier accepts. Every message of the walkthrough is captured as the
// sender's engine built it; then every leaf of every object in it is
// mutated in turn (a hash or identifier changed by one character, a time
// moved by a second, a string lengthened, a number raised, a member
// removed), the object is sealed and signed again with the sender's real
// agent key, and the message is delivered. Either the receiver refuses it
// and its record is exactly as it was, or it countersigns, and then its
// whole record, exported, verifies with nothing failed and nothing not
// checkable. What the property rules out is the third outcome: a
// countersigned record that its own verifier fails or cannot check.

// fixture brings a fresh pair to the point where msg, sent by from to
// to, is next.
type fixture func(t *testing.T) (from, to *recordtest.Side, txn string, msg [][]byte)

func mutationFixtures() map[string]fixture {
	capture := func(t *testing.T, sd *recordtest.Side, eventType string, act func() error) [][]byte {
		var msg [][]byte
		sd.Out.Intercept(func(_ string, objs [][]byte) error {
			if msg == nil && strings.Contains(string(objs[len(objs)-1]), `"event_type":"`+eventType+`"`) {
				msg = objs
				return fmt.Errorf("captured: %w", errCaptured)
			}
			return nil
		})
		_ = act()
		sd.Out.Intercept(nil)
		if msg == nil {
			t.Fatalf("no %s message was sent", eventType)
		}
		return msg
	}
	return map[string]fixture{
		"agreement.direct": func(t *testing.T) (*recordtest.Side, *recordtest.Side, string, [][]byte) {
			b, s, txn, msg := acceptance(t)
			return b, s, txn, msg
		},
		"agreement.committed": func(t *testing.T) (*recordtest.Side, *recordtest.Side, string, [][]byte) {
			b, s, txn, msg := commitMessage(t)
			return b, s, txn, msg
		},
		// The buyer's countersignature of the supplier's agreement.committed,
		// sent back on its own (the commitment in the answer).
		"countersignature": func(t *testing.T) (*recordtest.Side, *recordtest.Side, string, [][]byte) {
			b, s, _, txn, msg := countersignature(t)
			return b, s, txn, msg
		},
		"obligation.activated": func(t *testing.T) (*recordtest.Side, *recordtest.Side, string, [][]byte) {
			b, s, _ := recordtest.Pair(t)
			txn := recordtest.Form(t, b, s, "3200.00")
			msg := capture(t, b, "obligation.activated", func() error {
				_, err := b.Engine.IssueObligation(context.Background(), b.Actor(), record.ObligationInput{MandateID: b.Mandate, TransactionID: txn})
				return err
			})
			return b, s, txn, msg
		},
		"performance.declared": func(t *testing.T) (*recordtest.Side, *recordtest.Side, string, [][]byte) {
			b, s, _, txn, obl := committed(t)
			msg := capture(t, s, "performance.declared", func() error {
				_, err := s.Engine.AssertPerformance(context.Background(), s.Actor(), record.AssertInput{MandateID: s.Mandate, ObligationID: obl, Evidence: evidence("certificates")})
				return err
			})
			return s, b, txn, msg
		},
		"acceptance.granted": func(t *testing.T) (*recordtest.Side, *recordtest.Side, string, [][]byte) {
			b, s, _, txn, obl := committed(t)
			assertPerformance(t, s, obl, "20")
			msg := capture(t, b, "acceptance.granted", func() error {
				_, err := b.Engine.Respond(context.Background(), b.Actor(), record.RespondInput{MandateID: b.Mandate, ObligationID: obl, ResponseType: "accept", AcceptedQuantity: "15"})
				return err
			})
			return b, s, txn, msg
		},
	}
}

var errCaptured = fmt.Errorf("the test keeps this message")

// freeToVary are the members a sender may set as it likes: the times it
// states (a second earlier is as good a time), the due condition the
// obligee chooses, the unit's display name, which is never matched
// (canonical model §7), and the fresh id the proposer of an agreement
// chooses for the offeror's commitment (any unused one). Any other mutation that is countersigned is a
// rule nobody checks.
var freeToVary = map[string]bool{
	"policy_decision payload.evaluated_at":   true,
	"transaction_event payload.occurred_at":  true,
	"agreement payload.effective_at":         true,
	"agreement payload.commitment_ids.0":     true,
	"obligation payload.due_condition.at":    true,
	"obligation payload.unit_name":           true,
	"obligation payload.unit_name (removed)": true,
}

var (
	hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)
	anID    = regexp.MustCompile(`^[a-z]{3}_[A-Za-z0-9_-]+$`)
)

// mutations returns every single-leaf mutation of o's payload and of its
// envelope's created_by, each as a function that applies it to a copy.
func mutations(o map[string]any) []struct {
	path  string
	apply func(map[string]any)
} {
	var out []struct {
		path  string
		apply func(map[string]any)
	}
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		p := append([]string(nil), path...)
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(append(p, k), x[k])
				kk := append(append([]string(nil), p...), k)
				out = append(out, struct {
					path  string
					apply func(map[string]any)
				}{strings.Join(kk, ".") + " (removed)", func(m map[string]any) { delete(at(m, kk[:len(kk)-1]).(map[string]any), kk[len(kk)-1]) }})
			}
		case []any:
			for i := range x {
				walk(append(p, fmt.Sprint(i)), x[i])
			}
		default:
			out = append(out, struct {
				path  string
				apply func(map[string]any)
			}{strings.Join(p, "."), func(m map[string]any) { set(m, p, mutate(v)) }})
		}
	}
	walk([]string{"payload"}, o["payload"])
	walk([]string{"created_by"}, o["created_by"])
	return out
}

func mutate(v any) any {
	switch x := v.(type) {
	case string:
		switch {
		case hexHash.MatchString(x):
			if x[len(x)-1] == '0' {
				return x[:len(x)-1] + "1"
			}
			return x[:len(x)-1] + "0"
		case anID.MatchString(x):
			if x[len(x)-1] == 'a' {
				return x[:len(x)-1] + "b"
			}
			return x[:len(x)-1] + "a"
		}
		if t, err := envelope.ParseTimestamp(x); err == nil {
			return envelope.Timestamp(t.Add(-time.Second))
		}
		return x + "x"
	case json.Number:
		n, _ := x.Int64()
		return json.Number(fmt.Sprint(n + 1))
	case bool:
		return !x
	case nil:
		return "x"
	}
	return v
}

func at(m map[string]any, path []string) any {
	var cur any = m
	for _, k := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			var i int
			fmt.Sscan(k, &i)
			cur = c[i]
		}
	}
	return cur
}

func set(m map[string]any, path []string, v any) {
	parent := at(m, path[:len(path)-1])
	switch c := parent.(type) {
	case map[string]any:
		c[path[len(path)-1]] = v
	case []any:
		var i int
		fmt.Sscan(path[len(path)-1], &i)
		c[i] = v
	}
}

// resign seals o again and signs it with signer for its first signature's
// purpose and time.
func resign(t *testing.T, o map[string]any, signer signature.Signer) []byte {
	t.Helper()
	purpose, at := "object_issuance", time.Now()
	if sigs, _ := o["signatures"].([]any); len(sigs) > 0 {
		first := sigs[0].(map[string]any)
		purpose = first["purpose"].(string)
		at, _ = envelope.ParseTimestamp(first["signed_at"].(string))
	}
	o["signatures"] = []any{}
	if err := envelope.Seal(o); err != nil {
		return nil // no canonical form: the carrier would refuse it
	}
	if err := signature.Sign(o, signer, purpose, at); err != nil {
		t.Fatal(err)
	}
	b, err := canonical.Marshal(o)
	if err != nil {
		return nil
	}
	return b
}

// sweepCase is one genuine message of a mutation sweep: the side that
// takes it (to), its transaction, its objects, the sender's agent key,
// and take, which hands to a forged copy and reports whether to took it
// (countersigned or stored it).
type sweepCase struct {
	to     *recordtest.Side
	txn    string
	msg    [][]byte
	signer signature.Signer
	take   func(forged [][]byte) (bool, error)
}

// sweep mutates each object of a genuine message in turn (mutations),
// seals it again and signs it with the sender's agent key, and hands the
// message over (take). One not taken must leave the receiver's record
// exactly as it was; one taken must be a change free to vary, and leave
// the record verifying with nothing failed and nothing not checkable,
// after which the case is built afresh (fresh). skip passes over objects
// the sweep does not mutate. taken says what taking is ("countersigned",
// "stored"). It fails when no mutation was refused.
func sweep(t *testing.T, taken string, fresh func(t *testing.T) sweepCase, skip func(orig map[string]any) bool) (refusedN, accepted int) {
	t.Helper()
	ctx := context.Background()
	c := fresh(t)
	for i := range c.msg {
		orig, err := canonical.DecodeObject(c.msg[i])
		if err != nil {
			t.Fatal(err)
		}
		if skip != nil && skip(orig) {
			continue
		}
		for _, mu := range mutations(orig) {
			o, _ := canonical.DecodeObject(c.msg[i])
			mu.apply(o)
			raw := resign(t, o, c.signer)
			if raw == nil {
				continue
			}
			forged := slices.Clone(c.msg)
			forged[i] = raw
			before := holding(t, c.to, c.txn)
			ok, err := c.take(forged)
			if !ok {
				refusedN++
				if after := holding(t, c.to, c.txn); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Fatalf("%s of %s: not %s (%v) but the record changed", mu.path, orig["object_type"], taken, err)
				}
				continue
			}
			// Taken: the receiver's own record must verify.
			accepted++
			if !freeToVary[fmt.Sprint(orig["object_type"])+" "+mu.path] {
				t.Errorf("%s of %s was %s: is it really free to vary?", mu.path, orig["object_type"], taken)
			}
			rep, verr := export.VerifyTransaction(ctx, c.to.Node.Org.Store, c.txn)
			if verr != nil || rep.Results.Failed != 0 || rep.Results.NotCheckable != 0 {
				t.Fatalf("%s of %s was %s, and the record then verifies %+v (%v)", mu.path, orig["object_type"], taken, rep.Results, verr)
			}
			c = fresh(t)
		}
	}
	if refusedN == 0 {
		t.Fatal("no mutation was refused: the sweep mutated nothing")
	}
	return refusedN, accepted
}

func TestMutatedMessagesNeverCountersignedUnverifiable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the mutation sweep runs in the full suite")
	}
	ctx := context.Background()
	for name, fx := range mutationFixtures() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			refusedN, accepted := sweep(t, "countersigned", func(t *testing.T) sweepCase {
				from, to, txn, msg := fx(t)
				return sweepCase{to: to, txn: txn, msg: msg, signer: agentSigner(t, from), take: func(forged [][]byte) (bool, error) {
					_, err := to.Engine.Receive(ctx, from.Node.Org.Config().OrganizationID, txn, delivery.Raw(forged))
					return err == nil, err
				}}
			}, nil)
			t.Logf("%s: %d mutations refused, %d countersigned and verifying", name, refusedN, accepted)
		})
	}
}
