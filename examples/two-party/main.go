// Command two-party runs the whole A202 walkthrough between two party
// instances on this machine: northstar (the buyer) and delta (the
// supplier), each with its own state directory, keys, record and
// listeners, talking over HTTPS on loopback, their agents driven over MCP
// Streamable HTTP by a scripted client and their principals acting through
// their own surfaces. It prints a timeline and the deal (what was traded,
// for how much, who approved it, what was paid), then exports each side's
// record and verifies both. It exits 0 only if everything held.
//
//	go run ./examples/two-party [--out DIR] [--keep-running]
//
// The walkthrough stays on the happy path. With --keep-running both
// instances stay up, and it prints where each principal's approvals page
// and each agent's MCP endpoint are, and which file holds each token
// (never a token itself); once each principal has issued its agent a mandate
// listing them (party mandate issue; the walkthrough's own mandates cover
// its one transaction), an agent can try the acts that walk away or change
// course: cancel_transaction, propose_termination and agree_termination,
// waive_obligation, an amendment (propose_offer on the committed
// transaction, then accept_amendment), and several
// deliverables per agreement. docs/cli.md, "After the walkthrough", shows
// each call; internal/record/lifecycle_test.go runs each between two
// instances.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/demo"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/store"
)

func main() {
	out := flag.String("out", "", "directory for both state directories and bundles (default: a fresh temporary directory)")
	keep := flag.Bool("keep-running", false, "keep both instances running after the walkthrough, until interrupted")
	connect := flag.String("connect", "", "scripted-agent mode: drive instances already running, as northstar=URL,delta=URL (MCP base URLs)")
	tokens := flag.String("tokens-dir", "", "with --connect: directory holding NAME/agent token files")
	amount := flag.String("amount", "3200.00", "the offer's total in EUR")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: two-party [--out DIR] [--keep-running] [--amount A]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *connect != "" {
		if err := connectMode(*connect, *tokens, *amount, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "two-party:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *out, *keep, *amount, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "two-party:", err)
		os.Exit(1)
	}
}

// listen binds n loopback listeners on port 0. They stay open and are
// handed to the daemons (daemon.Options.Listeners), so no address is probed
// and released before use.
func listen(n int) ([]net.Listener, []string, error) {
	var ls []net.Listener
	var addrs []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return ls, addrs, nil
}

// run runs the walkthrough; with keep, the instances serve until ctx
// ends.
func run(ctx context.Context, out string, keep bool, amount string, w io.Writer) error {
	if out == "" {
		d, err := os.MkdirTemp("", "party-two-party-")
		if err != nil {
			return err
		}
		out = d
	}
	fmt.Fprintf(w, "Output directory: %s\n\n", out)
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	lns, ports, err := listen(6)
	if err != nil {
		return err
	}
	buyer, supplier, err := demo.Setup(ctx, out, demo.Ports{MCP: ports[0], Peer: ports[1], Admin: ports[2]}, demo.Ports{MCP: ports[3], Peer: ports[4], Admin: ports[5]})
	if err != nil {
		for _, l := range lns {
			l.Close()
		}
		return err
	}
	fmt.Fprintf(w, "northstar (buyer)    %s  mandate %s\n", buyer.Dir, buyer.MandateID)
	fmt.Fprintf(w, "delta (supplier)     %s  mandate %s\n\n", supplier.Dir, supplier.MandateID)

	// Start both instances; each logs to its own file in its state directory.
	runCtx, stopInstances := context.WithCancel(ctx)
	defer stopInstances()
	done := make(chan error, 2)
	for i, p := range []*demo.Party{buyer, supplier} {
		logf, err := os.OpenFile(filepath.Join(p.Dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer logf.Close()
		ready := make(chan struct{})
		go func() {
			done <- daemon.Run(runCtx, p.Dir, daemon.Options{
				Logger:    slog.New(slog.NewJSONHandler(logf, nil)),
				Ready:     func(daemon.Addrs) { close(ready) },
				Mount:     []daemon.Mounter{daemon.Record(daemon.PeerOptions{})},
				Listeners: daemon.Listeners{MCP: lns[3*i], Peer: lns[3*i+1], Admin: lns[3*i+2]},
			})
		}()
		select {
		case <-ready:
		case err := <-done:
			return fmt.Errorf("%s did not start: %w", p.Name, err)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("%s did not start within 30s", p.Name)
		}
	}
	ba, err := demo.Connect(ctx, buyer, w)
	if err != nil {
		return err
	}
	defer ba.Close()
	sa, err := demo.Connect(ctx, supplier, w)
	if err != nil {
		return err
	}
	defer sa.Close()

	res, werr := demo.Walkthrough(ctx, ba, sa, amount, func(ctx context.Context, rid string) error {
		return demo.Approve(ctx, buyer, rid) // the buyer's principal, through its admin surface
	})
	txn := res.TransactionID
	var events []map[string]any
	if txn != "" {
		if rec, err := ba.Call(ctx, "get_transaction_record", map[string]any{"transaction_id": txn}); err == nil {
			for _, e := range rec["events"].([]any) {
				events = append(events, e.(map[string]any))
			}
		}
	}
	demo.Timeline(w, res.Steps, events)
	if werr != nil {
		return werr
	}
	demo.Tell(w, res.Deal)

	fmt.Fprintln(w, "\nVerification (each side exports its own record and verifies it)")
	var hashes [][]string
	failed := false
	for _, p := range []*demo.Party{buyer, supplier} {
		dir := filepath.Join(out, p.Name+"-bundle")
		st, err := store.Open(filepath.Join(p.Dir, instance.DatabaseFile))
		if err != nil {
			return err
		}
		sum, err := export.Write(ctx, st, txn, dir, export.Options{})
		st.Close()
		if err != nil {
			return fmt.Errorf("export %s: %w", p.Name, err)
		}
		rep, hs, err := demo.Check(dir)
		if err != nil {
			return err
		}
		hashes = append(hashes, hs)
		fmt.Fprintf(w, "  %-10s %s: %d events; %d verified, %d failed, %d not checkable\n",
			p.Name, dir, sum.Events, rep.Results.Verified, rep.Results.Failed, rep.Results.NotCheckable)
		for _, c := range rep.Failures() {
			fmt.Fprintf(w, "      failed: step %d %s %s %s %s\n", c.Step, c.Name, c.Subject, c.Code, c.Detail)
		}
		if rep.Results.Failed > 0 {
			failed = true
		}
	}
	same := slices.Equal(hashes[0], hashes[1]) && len(hashes[0]) == 7
	fmt.Fprintf(w, "  both records hold the same %d events: %v\n", len(hashes[0]), same)
	if failed || !same {
		return errors.New("verification did not hold")
	}
	fmt.Fprintf(w, "\nDone: %s reached completed; both bundles verify.\n", txn)
	if keep {
		fmt.Fprintln(w, "\nInstances keep running (Ctrl-C to stop). Each token is in the file named; none is printed.")
		for _, p := range []*demo.Party{buyer, supplier} {
			keepRunning(w, p)
		}
		<-ctx.Done()
	}
	stopInstances()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return nil
}

// keepRunning tells where p's instance is reached and with which token
// file: its agent's MCP endpoint, its principal's approvals page (sign in
// by pasting the admin token at /login), and the operator's endpoints.
func keepRunning(w io.Writer, p *demo.Party) {
	fmt.Fprintf(w, "\n  %s\n", p.Name)
	fmt.Fprintf(w, "    approvals page  %s/  (sign in with the admin token: %s)\n", p.AdminURL, filepath.Join(p.Dir, instance.AdminTokenFile))
	fmt.Fprintf(w, "    agent (MCP)     %s  (bearer token: %s)\n", p.MCPURL, filepath.Join(p.Dir, instance.AgentTokenFile))
	fmt.Fprintf(w, "    readiness       %s/readyz; metrics %s/metrics  (bearer token: %s)\n", p.AdminURL, p.AdminURL, filepath.Join(p.Dir, daemon.MetricsTokenFile))
}

// connectMode drives two instances that already run elsewhere (the compose
// deployment): only their agents' MCP endpoints and agent tokens are
// needed. Mandates come from whoami; a held acceptance waits for a person
// to approve it on the buyer's approvals page.
func connectMode(spec, tokensDir, amount string, w io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	urls := map[string]string{}
	for _, kv := range strings.Split(spec, ",") {
		name, url, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--connect %q: want name=URL pairs", spec)
		}
		urls[name] = strings.TrimRight(url, "/")
	}
	var agents []*demo.Agent
	for _, name := range []string{"northstar", "delta"} {
		if urls[name] == "" {
			return fmt.Errorf("--connect names no %s", name)
		}
		tok, err := os.ReadFile(filepath.Join(tokensDir, name, "agent"))
		if err != nil {
			return err
		}
		p := &demo.Party{Name: name, MCPURL: urls[name] + "/mcp", AgentToken: strings.TrimSpace(string(tok))}
		var a *demo.Agent
		for i := 0; ; i++ {
			if a, err = demo.Connect(ctx, p, w); err == nil || i == 30 {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			return err
		}
		defer a.Close()
		agents = append(agents, a)
	}
	res, err := demo.Walkthrough(ctx, agents[0], agents[1], amount, nil)
	txn := res.TransactionID
	var events []map[string]any
	if txn != "" {
		if rec, err := agents[0].Call(ctx, "get_transaction_record", map[string]any{"transaction_id": txn}); err == nil {
			for _, e := range rec["events"].([]any) {
				events = append(events, e.(map[string]any))
			}
		}
	}
	demo.Timeline(w, res.Steps, events)
	if err != nil {
		return err
	}
	demo.Tell(w, res.Deal)
	fmt.Fprintf(w, "\nDone: %s reached completed.\n", txn)
	return nil
}
