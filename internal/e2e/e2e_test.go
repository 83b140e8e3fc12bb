package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partyd/party/internal/canonical"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/envelope"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/keys"
	"github.com/partyd/party/internal/signature"
	"github.com/partyd/party/internal/store"
)

var partyBin, twoPartyBin string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "party-e2e-")
	if err != nil {
		panic(err)
	}
	partyBin = filepath.Join(tmp, "party")
	twoPartyBin = filepath.Join(tmp, "two-party")
	for bin, pkg := range map[string]string{partyBin: "github.com/partyd/party/cmd/party", twoPartyBin: "github.com/partyd/party/examples/two-party"} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

func party(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(partyBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("party %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// sockets are an instance's three listeners, bound on port 0 by the test
// and handed to every `party serve` of that directory by socket
// activation (daemon.Activated): no address is probed and released, so no
// other test can take it in between, and a restarted instance keeps its
// addresses.
type sockets struct{ mcp, peer, admin *net.TCPListener }

var (
	socketsMu sync.Mutex
	socketsOf = map[string]*sockets{} // by state directory
)

// listen binds dir's three listeners and returns their addresses, for
// `party init`.
func listen(t *testing.T, dir string) (mcp, peer, admin string) {
	t.Helper()
	var ls [3]*net.TCPListener
	for i := range ls {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	socketsMu.Lock()
	socketsOf[dir] = &sockets{ls[0], ls[1], ls[2]}
	socketsMu.Unlock()
	return ls[0].Addr().String(), ls[1].Addr().String(), ls[2].Addr().String()
}

// activate makes cmd start as `party serve` under socket activation with
// dir's listeners. LISTEN_PID must name the server's own process, which is
// known only after fork: a shell sets it and execs.
func activate(t *testing.T, cmd *exec.Cmd, dir string) (closeParent func()) {
	t.Helper()
	socketsMu.Lock()
	s := socketsOf[dir]
	socketsMu.Unlock()
	if s == nil {
		t.Fatalf("no sockets for %s", dir)
	}
	var files []*os.File
	for _, l := range []*net.TCPListener{s.mcp, s.peer, s.admin} {
		f, err := l.File()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	cmd.Path = "/bin/sh"
	cmd.Args = append([]string{"sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`}, cmd.Args...)
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), "LISTEN_FDS=3", "LISTEN_FDNAMES=mcp:peer:admin")
	return func() {
		for _, f := range files {
			f.Close()
		}
	}
}

type proc struct {
	cmd *exec.Cmd
	log *os.File
}

func serve(t *testing.T, dir string) *proc {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(partyBin, "serve", "--dir", dir)
	closeParent := activate(t, cmd, dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	closeParent() // the child holds its own copies
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logf}
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if exec.Command(partyBin, "health", "--dir", dir).Run() == nil {
			return p
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s did not become healthy:\n%s", dir, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *proc) stop(sig syscall.Signal) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(sig)
	p.cmd.Wait()
	p.log.Close()
}

// setup inits both organisations with the CLI, pins each other's peer
// file, and issues both mandates through the principals' CLI, scoped to a
// transaction id agreed beforehand.
func setup(t *testing.T) (buyer, supplier *demo.Party) {
	t.Helper()
	root := t.TempDir()
	txn, _ := envelope.NewID("txn")
	now := time.Now().UTC()
	mk := func(name, orgID, role string) *demo.Party {
		dir := filepath.Join(root, name)
		mcp, peer, admin := listen(t, dir)
		party(t, "init", "--dir", dir, "--org", orgID, "--role", role, "--mcp-addr", mcp, "--peer-addr", peer, "--admin-addr", admin)
		cfg, err := instance.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		at, _ := instance.LoadToken(dir, instance.AgentTokenFile)
		ad, _ := instance.LoadToken(dir, instance.AdminTokenFile)
		return &demo.Party{Name: name, Org: orgID, Dir: dir, Config: cfg, TransactionID: txn,
			MCPURL: "http://" + mcp + "/mcp", AdminURL: "http://" + admin, AgentToken: at, AdminToken: ad}
	}
	buyer = mk("northstar", "org_northstar", "procurement_lead")
	supplier = mk("delta", "org_delta", "managing_director")
	party(t, "peer", "add", "--dir", buyer.Dir, filepath.Join(supplier.Dir, instance.PeerFile))
	party(t, "peer", "add", "--dir", supplier.Dir, filepath.Join(buyer.Dir, instance.PeerFile))
	issue := func(p *demo.Party, actions []string, other string, rules []any) {
		req := map[string]any{
			"valid_from": envelope.Timestamp(now.Add(-time.Minute)), "valid_until": envelope.Timestamp(now.Add(24 * time.Hour)),
			"actions":        actions,
			"scope":          map[string]any{"transaction_ids": []any{txn}, "counterparty_organization_ids": []any{other}},
			"spending_limit": map[string]any{"currency": "EUR", "amount": "4000.00"},
		}
		if rules != nil {
			req["approval_rules"] = rules
		}
		b, _ := json.Marshal(req)
		f := filepath.Join(t.TempDir(), "request.json")
		os.WriteFile(f, b, 0o600)
		var m map[string]any
		if err := json.Unmarshal([]byte(party(t, "mandate", "issue", "--dir", p.Dir, "--file", f, "--json")), &m); err != nil {
			t.Fatal(err)
		}
		p.MandateID = m["id"].(string)
	}
	issue(buyer, []string{"offer.accept", "agreement.sign", "obligation.activated", "acceptance.granted", "acceptance.rejected", "settlement.instruct", "transaction.complete"}, supplier.Org,
		[]any{map[string]any{"id": "r_acceptance", "when": map[string]any{"path": "$.action_type", "operator": "equals", "value": "offer.accept"},
			"approver": map[string]any{"organization_id": buyer.Org, "role": "procurement_lead"}, "expires_after_seconds": 3600}})
	issue(supplier, []string{"offer.submit", "agreement.sign", "performance.declared", "transaction.complete"}, buyer.Org, nil)
	return buyer, supplier
}

// records compares both databases' events: byte-identical, recorded, each
// signed by the two organisations' agent keys.
func records(t *testing.T, buyer, supplier *demo.Party, txn string, want int) {
	t.Helper()
	ctx := context.Background()
	var held [2][][]byte
	pubs := map[string]any{}
	for i, p := range []*demo.Party{buyer, supplier} {
		st, err := store.Open(filepath.Join(p.Dir, instance.DatabaseFile))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, txn)
		if err != nil || len(evs) != want {
			st.Close()
			t.Fatalf("%s holds %d events (%v), want %d", p.Name, len(evs), err, want)
		}
		for _, e := range evs {
			if e.Status != store.EventRecorded {
				t.Fatalf("%s: event %d is %s", p.Name, e.Sequence, e.Status)
			}
			b, _ := st.GetObject(ctx, e.TransactionID, e.EventID)
			held[i] = append(held[i], b)
		}
		rec, _ := st.GetObject(ctx, "", p.Config.AgentKeyID) // a key record: bound to no transaction
		obj, _ := canonical.DecodeObject(rec)
		pub, _ := keys.ParseJWK(obj["payload"].(map[string]any)["public_key_jwk"])
		pubs[p.Config.AgentKeyID] = pub
		st.Close()
	}
	for i := range held[0] {
		if !bytes.Equal(held[0][i], held[1][i]) {
			t.Fatalf("event %d differs between the two databases", i+1)
		}
		obj, _ := canonical.DecodeObject(held[0][i])
		entries, _ := signature.Entries(obj)
		if len(entries) != 2 {
			t.Fatalf("event %d has %d signatures", i+1, len(entries))
		}
		for j, en := range entries {
			pub, ok := pubs[en["key_id"].(string)]
			if !ok {
				t.Fatalf("event %d is signed by %v, not an agent of the two organisations", i+1, en["key_id"])
			}
			if err := signature.VerifyEntry(obj, j, pub); err != nil {
				t.Fatal(err)
			}
		}
		if entries[0]["key_id"] == entries[1]["key_id"] {
			t.Fatalf("event %d is signed twice by one party", i+1)
		}
	}
}

func TestTwoServeProcessesWalkthrough(t *testing.T) {
	ctx := context.Background()
	buyer, supplier := setup(t)
	serve(t, buyer.Dir)
	serve(t, supplier.Dir)
	ba, err := demo.Connect(ctx, buyer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ba.Close()
	sa, err := demo.Connect(ctx, supplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	approved := false
	run, err := demo.Walkthrough(ctx, ba, sa, "3200.00", func(ctx context.Context, rid string) error {
		approved = true
		return demo.Approve(ctx, buyer, rid)
	})
	if err != nil {
		t.Fatal(err)
	}
	txn, steps := run.TransactionID, run.Steps
	if !approved || len(steps) == 0 {
		t.Fatal("the buyer's acceptance was not held for its principal's approval")
	}
	records(t, buyer, supplier, txn, 7)

	// What an operator sees of it: each act counted once as it happened,
	// the payment's rail call, the messages each side accepted, and the
	// gauges read from each record; no SDK line per session in the logs.
	bm, sm := checkOps(t, buyer), checkOps(t, supplier)
	for _, c := range []struct {
		m            scraped
		act, outcome string
	}{
		{bm, "offer.accept", "recorded"}, {bm, "obligation.activated", "recorded"}, {bm, "acceptance.granted", "recorded"},
		{bm, "settlement.instruct", "recorded"}, {sm, "offer.submit", "delivered"}, {sm, "performance.declared", "recorded"},
		{sm, "transaction.complete", "recorded"},
	} {
		c.m.want(t, "party_acts_total", map[string]string{"act": c.act, "outcome": c.outcome, "reason_code": ""}, 1)
	}
	bm.want(t, "party_rail_calls_total", map[string]string{"rail": "rail_test_sandbox", "call": "submit", "outcome": "succeeded"}, 1)
	for _, c := range []struct {
		m    scraped
		p, o *demo.Party
	}{{bm, buyer, supplier}, {sm, supplier, buyer}} {
		c.m.want(t, "party_transactions", map[string]string{"state": "completed"}, 1)
		c.m.want(t, "party_transactions", map[string]string{"state": "expired"}, 0)
		c.m.want(t, "party_approval_requests_pending", nil, 0)
		if n := c.m.value(t, "party_received_messages_total", map[string]string{"outcome": "accepted", "reason_code": ""}); n < 3 {
			t.Fatalf("%s accepted %v messages from %s", c.p.Name, n, c.o.Name)
		}
		// A series for the pinned counterparty, whether or not anything waits.
		c.m.value(t, "party_outbox_pending_messages", map[string]string{"peer": c.o.Org})
		quietLog(t, c.p, "session initialized", "server session connected")
	}

	// No private key material in any tool result, log or database.
	for _, p := range []*demo.Party{buyer, supplier} {
		var haystacks [][]byte
		haystacks = append(haystacks, ba.Transcript(), sa.Transcript())
		for _, f := range []string{instance.DatabaseFile, "serve.log"} {
			data, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			haystacks = append(haystacks, data)
		}
		for _, f := range []string{instance.PrincipalKeyFile, instance.AgentKeyFile, instance.TLSKeyFile} {
			for _, needle := range secrets(t, filepath.Join(p.Dir, f)) {
				for i, h := range haystacks {
					if bytes.Contains(h, needle) {
						t.Errorf("%s's %s appears in haystack %d", p.Name, f, i)
					}
				}
			}
		}
	}

	// Each side's private keys exist only in its own state directory.
	for _, pr := range [][2]*demo.Party{{buyer, supplier}, {supplier, buyer}} {
		for _, f := range []string{instance.PrincipalKeyFile, instance.AgentKeyFile, instance.TLSKeyFile} {
			secret, err := os.ReadFile(filepath.Join(pr[0].Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			filepath.Walk(pr[1].Dir, func(p string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					if data, _ := os.ReadFile(p); bytes.Contains(data, secret) {
						t.Errorf("%s's %s found in %s", pr[0].Name, f, p)
					}
				}
				return nil
			})
		}
		db, _ := os.ReadFile(filepath.Join(pr[0].Dir, instance.DatabaseFile))
		if bytes.Contains(db, []byte("PRIVATE KEY")) {
			t.Errorf("%s's database holds private key material", pr[0].Name)
		}
	}

	// Both sides export and verify with the command line; each agent
	// verifies its own record, and the other side's export, over MCP.
	bundles := map[string]string{}
	for _, p := range []*demo.Party{buyer, supplier} {
		out := filepath.Join(t.TempDir(), p.Name+"-bundle")
		party(t, "export", "--dir", p.Dir, "--transaction", txn, out)
		party(t, "verify", out)
		bundles[p.Name] = out
	}
	for _, c := range []struct {
		a    *demo.Agent
		args map[string]any
	}{
		{ba, map[string]any{"transaction_id": txn}},
		{ba, map[string]any{"bundle_dir": bundles["delta"]}},
		{sa, map[string]any{"transaction_id": txn}},
		{sa, map[string]any{"bundle_dir": bundles["northstar"]}},
	} {
		rep, err := c.a.Call(ctx, "verify_evidence", c.args)
		if err != nil {
			t.Fatal(err)
		}
		res := rep["results"].(map[string]any)
		if res["failed"].(float64) != 0 || res["verified"].(float64) < 100 {
			t.Fatalf("%s verify_evidence %v: %v", c.a.Party.Name, c.args, res)
		}
	}
}

func TestKilledBuyerConvergesAfterRestart(t *testing.T) {
	ctx := context.Background()
	buyer, supplier := setup(t)
	bp := serve(t, buyer.Dir)
	sp := serve(t, supplier.Dir)
	ba, err := demo.Connect(ctx, buyer, nil)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := demo.Connect(ctx, supplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	off, err := sa.Call(ctx, "propose_offer", map[string]any{"mandate_id": supplier.MandateID, "transaction_id": supplier.TransactionID,
		"counterparty_organization_id": buyer.Org, "terms": demo.Terms("3200.00"), "valid_until": envelope.Timestamp(time.Now().UTC().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	offerID := off["objects"].(map[string]any)["offer"]
	inbox, err := ba.Call(ctx, "list_inbox", map[string]any{"mandate_id": buyer.MandateID})
	if err != nil {
		t.Fatal(err)
	}
	act := inbox["offers"].([]any)[0].(map[string]any)["acceptance_act"]
	req, err := ba.Call(ctx, "request_approval", map[string]any{"mandate_id": buyer.MandateID, "proposed_action": act})
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Approve(ctx, buyer, req["approval_request_id"].(string)); err != nil {
		t.Fatal(err)
	}
	st, _ := ba.Call(ctx, "approval_status", map[string]any{"approval_request_id": req["approval_request_id"]})

	// The supplier is down: the buyer signs and its act waits.
	sp.stop(syscall.SIGTERM)
	acc, err := ba.Call(ctx, "accept_offer", map[string]any{"mandate_id": buyer.MandateID, "offer_id": offerID, "approval_id": st["approval_id"]})
	if err != nil || acc["status"] != "pending" {
		t.Fatalf("accept while the supplier is down: %v %v", acc, err)
	}
	// Kill the buyer before the countersignature can arrive, then bring
	// both back.
	ba.Close()
	bp.stop(syscall.SIGKILL)
	serve(t, supplier.Dir)
	serve(t, buyer.Dir)
	ba, err = demo.Connect(ctx, buyer, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ba.Close()
	deadline := time.Now().Add(90 * time.Second)
	for {
		rec, err := ba.Call(ctx, "get_transaction_record", map[string]any{"transaction_id": supplier.TransactionID})
		if err == nil && rec["state"] == "committed" && rec["pending"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the buyer did not converge: %v %v", rec, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	records(t, buyer, supplier, supplier.TransactionID, 2)
}

// secrets returns byte strings that would betray a private key file if
// found elsewhere: the PEM body, and the private scalar as base64url, std
// base64 and hex.
func secrets(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keys.ParsePrivatePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("%s is not a P-256 key", path)
	}
	d, err := ek.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	body := strings.Join(lines[1:len(lines)-1], "")
	return [][]byte{[]byte(body[:48]), []byte(base64.RawURLEncoding.EncodeToString(d)), []byte(base64.StdEncoding.EncodeToString(d)[:40]), []byte(hex.EncodeToString(d))}
}

// TestRestartKeepsMandatesAndKeys restarts serve: mandates issued before
// still verify, and objects made after are signed with the same keys.
func TestRestartKeepsMandatesAndKeys(t *testing.T) {
	ctx := context.Background()
	buyer, supplier := setup(t)
	serve(t, buyer.Dir)
	sp := serve(t, supplier.Dir)
	act := map[string]any{"action_type": "offer.submit", "transaction_id": supplier.TransactionID,
		"counterparty_organization_id": buyer.Org, "proposed_terms": demo.Terms("3200.00")}
	sa, err := demo.Connect(ctx, supplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sa.Call(ctx, "verify_mandate", map[string]any{"mandate_id": supplier.MandateID, "proposed_action": act})
	if err != nil || v["decision"] != "allow" {
		t.Fatalf("before restart: %v %v", v, err)
	}
	sa.Close()
	sp.stop(syscall.SIGTERM)
	serve(t, supplier.Dir)
	sa, err = demo.Connect(ctx, supplier, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	v, err = sa.Call(ctx, "verify_mandate", map[string]any{"mandate_id": supplier.MandateID, "proposed_action": act})
	if err != nil || v["decision"] != "allow" {
		t.Fatalf("after restart: %v %v", v, err)
	}
	off, err := sa.Call(ctx, "propose_offer", map[string]any{"mandate_id": supplier.MandateID, "transaction_id": supplier.TransactionID,
		"counterparty_organization_id": buyer.Org, "terms": demo.Terms("3200.00"), "valid_until": envelope.Timestamp(time.Now().UTC().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	// The offer made after the restart verifies under the agent key that
	// init created and that the buyer trusts.
	st, err := store.Open(filepath.Join(buyer.Dir, instance.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := st.GetObject(ctx, off["transaction_id"].(string), off["objects"].(map[string]any)["offer"].(string))
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := canonical.DecodeObject(raw)
	entries, _ := signature.Entries(obj)
	if entries[0]["key_id"] != supplier.Config.AgentKeyID {
		t.Fatalf("the offer is signed with %v, not the agent key %s init created", entries[0]["key_id"], supplier.Config.AgentKeyID)
	}
	rec, _ := st.GetObject(ctx, "", supplier.Config.AgentKeyID) // a key record: bound to no transaction
	kr, _ := canonical.DecodeObject(rec)
	pub, _ := keys.ParseJWK(kr["payload"].(map[string]any)["public_key_jwk"])
	if err := signature.VerifyEntry(obj, 0, pub); err != nil {
		t.Fatal(err)
	}
}

// TestComposeMandatesWithScriptedAgents runs what the compose deployment
// runs: instances set up with the CLI and the mandate requests in
// deploy/mandates, then the two-party example in its scripted-agent mode,
// which holds only the two agent tokens, and a person approving the
// acceptance Northstar's mandate holds for approval; the agents reach
// completed only after that approval.
func TestComposeMandatesWithScriptedAgents(t *testing.T) {
	root := t.TempDir()
	dirs := map[string]string{}
	urls := []string{}
	for _, o := range []struct{ name, org, role string }{{"northstar", "org_northstar", "procurement_lead"}, {"delta", "org_delta", "managing_director"}} {
		dir := filepath.Join(root, o.name)
		mcp, peer, admin := listen(t, dir)
		party(t, "init", "--dir", dir, "--org", o.org, "--role", o.role, "--mcp-addr", mcp, "--peer-addr", peer, "--admin-addr", admin)
		dirs[o.name] = dir
		urls = append(urls, o.name+"=http://"+mcp)
		tokens := filepath.Join(root, "tokens", o.name)
		os.MkdirAll(tokens, 0o700)
		tok, _ := os.ReadFile(filepath.Join(dir, instance.AgentTokenFile))
		os.WriteFile(filepath.Join(tokens, "agent"), tok, 0o600)
	}
	party(t, "peer", "add", "--dir", dirs["northstar"], filepath.Join(dirs["delta"], instance.PeerFile))
	party(t, "peer", "add", "--dir", dirs["delta"], filepath.Join(dirs["northstar"], instance.PeerFile))
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	for name, org := range map[string]string{"northstar": "org_northstar", "delta": "org_delta"} {
		// As deploy/init.sh does, the request's interval is set from now.
		data, err := os.ReadFile(filepath.Join(repo, "deploy", "mandates", org+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var req map[string]any
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		req["valid_from"], req["valid_until"] = envelope.Timestamp(now.Add(-time.Minute)), envelope.Timestamp(now.Add(90*24*time.Hour))
		data, _ = json.Marshal(req)
		f := filepath.Join(root, org+"-mandate.json")
		os.WriteFile(f, data, 0o600)
		party(t, "mandate", "issue", "--dir", dirs[name], "--file", f)
	}
	serve(t, dirs["northstar"])
	serve(t, dirs["delta"])
	cmd := exec.Command(twoPartyBin, "--connect", strings.Join(urls, ","), "--tokens-dir", filepath.Join(root, "tokens"))
	// A file: read while the process writes it, with no race.
	out, err := os.Create(filepath.Join(root, "agents.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	output := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	// Northstar's mandate holds the acceptance for its procurement lead,
	// who approves it with the CLI, as compose-check.sh does in the
	// running container: the agents, holding agent tokens only, wait.
	var req string
	for deadline := time.Now().Add(60 * time.Second); ; {
		var pending []map[string]any
		if err := json.Unmarshal([]byte(party(t, "approvals", "--dir", dirs["northstar"], "--json")), &pending); err != nil {
			t.Fatal(err)
		}
		if len(pending) > 0 {
			req, _ = pending[0]["approval_request_id"].(string)
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the scripted agents ended before asking for approval: %v\n%s", err, output())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no approval request within 60s\n%s", output())
		}
	}
	party(t, "approve", "--dir", dirs["northstar"], req)
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(output(), "reached completed") {
			t.Fatalf("scripted agents: %v (approval request %s)\n%s", err, req, output())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the scripted agents did not finish after the approval\n%s", output())
	}
}
