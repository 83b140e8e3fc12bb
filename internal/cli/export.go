package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/partyd/party/internal/daemon"
	"github.com/partyd/party/internal/export"
	"github.com/partyd/party/internal/instance"
	"github.com/partyd/party/internal/store"
)

func init() {
	register("export", "write a transaction's record as a bundle directory for `party verify`", runExport)
	// Every serve and mcp process runs the record engine, the carriers and
	// the record tools.
	addServeMount(daemon.Record(daemon.PeerOptions{}))
}

const exportUsage = `Usage: party export --dir DIR --transaction TXN [--omit-stream KIND:ID]... [--omit-object ID]... [--json] OUTDIR

Writes transaction TXN of the instance in DIR as a bundle directory at
OUTDIR (which must not exist, or be empty): objects/*.json (the exact bytes
held, key records included), mandates/*.json, keys.json and bundle.json
{"rules_version", "transaction_id"}. Events still waiting for the
counterparty's countersignature are left out. It reads the database only,
so it works whether or not 'party serve' is running.

--omit-stream and --omit-object withhold chosen streams or objects
(selective disclosure); 'party verify' then reports them as undisclosed.

Exit status: 0 when the bundle is written, 1 on failure, 2 on a usage error.
`

// openRecord opens the record of the state directory dir for a command,
// cmd, that reads it without the organisation's keys; when it cannot, it
// says why on stderr and returns nil (the command then exits 1).
func openRecord(cmd, dir string, stderr io.Writer) *store.Store {
	if !instance.Exists(dir) {
		fmt.Fprintf(stderr, "%s: %s is not a state directory (run 'party init')\n", cmd, dir)
		return nil
	}
	st, err := store.Open(instance.Paths{Dir: dir}.Join(instance.DatabaseFile))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil
	}
	return st
}

func runExport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	c := newFlags("party export", exportUsage)
	dir := c.dirFlag()
	txn := c.String("transaction", "", "transaction id (txn_...)")
	asJSON := c.Bool("json", false, "print a JSON summary")
	var streams, objects stringList
	c.Var(&streams, "omit-stream", "withhold a stream (kind:id); repeatable")
	c.Var(&objects, "omit-object", "withhold an object or mandate by id; repeatable")
	pos, code, done := c.parse(args, stdout, stderr)
	switch {
	case done:
		return code
	case *dir == "" || *txn == "":
		return c.usageError(stderr, "--dir and --transaction are required")
	case len(pos) != 1:
		return c.usageError(stderr, "give exactly one OUTDIR")
	}
	st := openRecord("party export", *dir, stderr)
	if st == nil {
		return 1
	}
	defer st.Close()
	sum, err := export.Write(context.Background(), st, *txn, pos[0], export.Options{OmitStreams: []string(streams), OmitObjects: []string(objects)})
	if err != nil {
		fmt.Fprintf(stderr, "party export: %v\n", err)
		return 1
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(sum)
		return 0
	}
	fmt.Fprintf(stdout, "exported %s to %s: %d objects (%d events), %d mandates, %d keys\n",
		sum.TransactionID, sum.Dir, sum.Objects, sum.Events, sum.Mandates, sum.Keys)
	return 0
}
