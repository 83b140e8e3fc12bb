package object

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/protocol"
)

func marshal(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := canonical.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var event = map[string]any{
	"id": "evt_1", "object_type": "transaction_event", "transaction_id": "txn_1", "content_hash": "sha256:00",
	"created_by": map[string]any{"organization_id": "org_a", "agent_id": "agt_a", "mandate_id": "mdt_a"},
	"payload": map[string]any{
		"sequence": 3, "event_type": "agreement.direct", "from_state": "draft", "to_state": "agreement_pending",
		"data": map[string]any{"agreement_id": "agr_1"},
	},
	"signatures": []any{map[string]any{"key_id": "key_a"}, map[string]any{"key_id": "key_b"}},
}

// TestViewReadsTheEnvelope: every accessor reads the member it names, of
// the exact bytes' decoding.
func TestViewReadsTheEnvelope(t *testing.T) {
	b := marshal(t, event)
	v, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want any }{
		{string(v.Raw()), string(b)},
		{v.ID(), "evt_1"}, {v.Type(), protocol.TransactionEvent}, {v.Txn(), "txn_1"}, {v.Hash(), "sha256:00"},
		{v.Org(), "org_a"}, {v.Agent(), "agt_a"}, {v.Mandate(), "mdt_a"},
		{len(v.Signatures()), 2}, {v.FirstSigner(), "key_a"},
		{v.P("absent"), ""}, {len(v.PSub("absent")), 0},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	if v.PSub("absent") == nil {
		t.Error("an absent object member reads as nil, not as an empty object")
	}
	if _, err := Parse([]byte(`{"id":`)); err == nil {
		t.Error("bytes that are no JSON object parsed")
	}
}

// TestOfferValidity: an offer lapses at its valid_until, and one without a
// readable valid_until counts as lapsed.
func TestOfferValidity(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	offer := Over(nil, map[string]any{"payload": map[string]any{"valid_until": "2026-12-06T12:00:00Z", "offeror": map[string]any{"organization_id": "org_a"}}})
	if offer.Expired(at.Add(-time.Second)) || !offer.Expired(at) {
		t.Error("valid_until is not where the offer lapses")
	}
	if offer.PartyOrg("offeror") != "org_a" {
		t.Errorf("offeror %q", offer.PartyOrg("offeror"))
	}
	if !Over(nil, map[string]any{}).Expired(at) {
		t.Error("an offer without valid_until did not lapse")
	}
}

// TestCacheSharesViews: one cache gives the same view for the same bytes,
// two caches never share one, and Remember keeps the value it is given.
func TestCacheSharesViews(t *testing.T) {
	b := marshal(t, event)
	var one, two Cache
	a, _ := one.Parse(b)
	again, _ := one.Parse(b)
	other, _ := two.Parse(b)
	if a != again || a == other {
		t.Fatal("views are not shared within a cache, or are shared across caches")
	}
	all, err := one.ParseAll([][]byte{b, b}, nil)
	if err != nil || len(all) != 2 || all[0] != a || all[1] != a {
		t.Fatalf("ParseAll through the cache: %v (%v)", all, err)
	}
	fresh, err := ParseAll([][]byte{b}, nil)
	if err != nil || len(fresh) != 1 || fresh[0] == a || fresh[0].ID() != "evt_1" {
		t.Fatalf("ParseAll without a cache: %v (%v)", fresh, err)
	}
	failed := errors.New("read failed")
	if got, err := ParseAll(nil, failed); got != nil || err != failed {
		t.Fatalf("a failed read: %v, %v", got, err)
	}
	if _, err := ParseAll([][]byte{b, []byte("{")}, nil); err == nil {
		t.Fatal("bytes that are no object parsed")
	}
	m := map[string]any{"id": "off_1", "n": json.Number("1")}
	kept := one.Remember(marshal(t, m), m)
	if got, _ := one.Parse(marshal(t, m)); got != kept {
		t.Fatal("a remembered view is not the one parsed next")
	}
}

// TestCacheBounded: a full cache starts again empty, so it never holds
// more than maxParsed views.
func TestCacheBounded(t *testing.T) {
	var c Cache
	first, _ := c.Parse(marshal(t, map[string]any{"id": "x"}))
	for i := range maxParsed {
		c.Parse(marshal(t, map[string]any{"id": fmt.Sprint(i)}))
	}
	if len(c.parsed) > maxParsed {
		t.Fatalf("%d views held", len(c.parsed))
	}
	if again, _ := c.Parse(marshal(t, map[string]any{"id": "x"})); again == first {
		t.Fatal("the cache kept every view")
	}
}

// A view reads the members of the exact bytes it was made from.
func ExampleParse() {
	b, _ := canonical.Marshal(map[string]any{
		"id": "evt_1", "object_type": "transaction_event",
		"payload": map[string]any{"sequence": 1, "event_type": "agreement.direct"},
	})
	v, err := Parse(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	ev := AsEvent(v)
	fmt.Println(v.Type(), ev.Seq(), ev.EventType())
	// Output: transaction_event 1 agreement.direct
}

// A typed view is made only from a view of its type, and reads its
// members by name.
func ExampleAsObligation() {
	b, _ := canonical.Marshal(map[string]any{
		"id": "obl_1", "object_type": "obligation",
		"payload": map[string]any{
			"obligor":  map[string]any{"organization_id": "org_delta", "agent_id": "agt_d"},
			"obligee":  map[string]any{"organization_id": "org_northstar", "agent_id": "agt_n"},
			"quantity": "40", "unit_code": "HUR",
		},
	})
	v, _ := Parse(b)
	if obl := AsObligation(v); obl != nil {
		fmt.Println(obl.Obligor(), "owes", obl.Obligee(), obl.Quantity(), obl.UnitCode())
	}
	fmt.Println(AsOffer(v) == nil)
	// Output:
	// org_delta owes org_northstar 40 HUR
	// true
}
