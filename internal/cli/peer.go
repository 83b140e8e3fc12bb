package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"text/tabwriter"

	"github.com/partyd/party/internal/instance"
)

func init() {
	register("peer", "pin a counterparty's peer file, or list the pinned ones", runPeer)
}

const peerUsage = `Usage: party peer add --dir DIR [--json] FILE
       party peer list --dir DIR [--json]

Counterparties exchange peer files out of band, like SSH host keys: each
instance's peer.json names its organisation, its AgentCard URL, the
SHA-256 of its TLS certificate and its principal keys' thumbprints.

  add FILE   validate FILE (- reads standard input) and pin it in DIR/peers/.
             From then on TLS to that organisation accepts exactly that
             certificate, requests presenting it as a client certificate
             are that organisation's, and its agent keys are trusted only
             through key records its pinned principal keys signed.
             Adding the same file again changes nothing. A different file
             for an organisation already pinned is refused: re-pinning is
             deliberate (remove DIR/peers/ORG.json first). A file naming
             this instance's own organisation is refused.
  list       the pinned counterparties.

With --json, add prints {"outcome": "pinned"|"unchanged", "peer": {...}}
and list prints a JSON array of peer files; a failure prints
{"outcome": "error", "reason_codes": [], "detail": ...}.

Exit status: 0 on success, 1 when the file is refused or unreadable, 2
on a usage error.
`

// maxPeerFile bounds a peer file; a real one is well under 4 KiB.
const maxPeerFile = 64 << 10

func runPeer(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runSubcommand("party peer", peerUsage, map[string]func([]string) int{
		"add":  func(args []string) int { return runPeerAdd(args, stdin, stdout, stderr) },
		"list": func(args []string) int { return runPeerList(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// peerFlags parses a peer subcommand's flags, which may come before or
// after the positional arguments. It returns done with the exit status
// when the command must stop (help, or a usage mistake).
func peerFlags(name string, args []string, stdout, stderr io.Writer) (dir string, asJSON bool, pos []string, code int, done bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	d := fs.String("dir", os.Getenv("PARTY_DIR"), "the instance's state directory (default $PARTY_DIR)")
	j := fs.Bool("json", false, "machine-readable output")
	usage := func(w io.Writer) {
		fmt.Fprint(w, peerUsage)
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(stdout)
				return "", false, nil, 0, true
			}
			fmt.Fprintf(stderr, "%s: %v\n\n", name, err)
			usage(stderr)
			return "", false, nil, 2, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if *d == "" {
		fmt.Fprintf(stderr, "%s: --dir is required\n\n", name)
		usage(stderr)
		return "", false, nil, 2, true
	}
	return *d, *j, pos, 0, false
}

// peerFailure reports err on stderr (and stdout with --json) and returns 1.
func peerFailure(name string, err error, asJSON bool, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if asJSON {
		peerJSON(stdout, map[string]any{"outcome": "error", "reason_codes": []string{}, "detail": err.Error()})
	}
	return 1
}

func peerJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func runPeerAdd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	const name = "party peer add"
	dir, asJSON, pos, code, done := peerFlags(name, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "%s: want exactly one FILE, got %d arguments\n\n%s", name, len(pos), peerUsage)
		return 2
	}
	if !instance.Exists(dir) {
		return peerFailure(name, fmt.Errorf("%s is not a state directory (run 'party init' first)", dir), asJSON, stdout, stderr)
	}
	data, err := readPeerFile(pos[0], stdin)
	if err != nil {
		return peerFailure(name, err, asJSON, stdout, stderr)
	}
	// Whether the same peer is already pinned decides "unchanged" versus
	// "pinned"; AddPeer itself treats that case as a no-op.
	outcome := "pinned"
	if p, err := instance.ParsePeerFile(data); err == nil {
		if held, err := instance.Peers(dir); err == nil {
			for _, h := range held {
				if reflect.DeepEqual(h, p) {
					outcome = "unchanged"
				}
			}
		}
	}
	p, err := instance.AddPeer(dir, data)
	if err != nil {
		return peerFailure(name, err, asJSON, stdout, stderr)
	}
	if asJSON {
		peerJSON(stdout, map[string]any{"outcome": outcome, "peer": p})
		return 0
	}
	if outcome == "unchanged" {
		fmt.Fprintf(stdout, "%s is already pinned with this file; nothing changed\n", p.OrganizationID)
		return 0
	}
	fmt.Fprintf(stdout, "pinned %s\n  agent card   %s\n  TLS SHA-256  %s\n  principal keys pinned: %d\n",
		p.OrganizationID, p.AgentCardURL, p.TLSCertificateSHA256, len(p.PrincipalKeyThumbprints))
	return 0
}

// readPeerFile reads path, or standard input for "-", refusing anything
// larger than a peer file can be.
func readPeerFile(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxPeerFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPeerFile {
		return nil, fmt.Errorf("%s is over %d bytes; a peer file is much smaller", path, maxPeerFile)
	}
	return data, nil
}

func runPeerList(args []string, stdout, stderr io.Writer) int {
	const name = "party peer list"
	dir, asJSON, pos, code, done := peerFlags(name, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n\n%s", name, pos[0], peerUsage)
		return 2
	}
	if !instance.Exists(dir) {
		return peerFailure(name, fmt.Errorf("%s is not a state directory (run 'party init' first)", dir), asJSON, stdout, stderr)
	}
	peers, err := instance.Peers(dir)
	if err != nil {
		return peerFailure(name, err, asJSON, stdout, stderr)
	}
	if asJSON {
		if peers == nil {
			peers = []instance.PeerInfo{}
		}
		peerJSON(stdout, peers)
		return 0
	}
	if len(peers) == 0 {
		fmt.Fprintln(stdout, "no counterparty pinned yet (party peer add --dir DIR THEIR_PEER_FILE)")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORGANIZATION\tAGENT CARD\tTLS SHA-256\tPRINCIPAL KEYS")
	for _, p := range peers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", p.OrganizationID, p.AgentCardURL, p.TLSCertificateSHA256, len(p.PrincipalKeyThumbprints))
	}
	tw.Flush()
	return 0
}
