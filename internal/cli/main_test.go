package cli_test

import (
	"os"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/partyd/party/internal/cli"
)

// TestMain lets testscript scripts run "party" as a command: the test
// binary re-executes itself with cli.Main as its main function. It
// serves "paid-bundle AMOUNT DIR" too, which writes a signed synthetic
// bundle completed on a payment of AMOUNT (paidBundle): a record whose
// ledger has a finding cannot be written by party itself, which refuses
// to build it.
//
// Under -race a program sleeps a second as it exits (the race runtime's
// atexit_sleep_ms), and the scripts start party hundreds of times: the
// commands this binary starts sleep 10 ms instead (testscript passes
// GORACE through).
func TestMain(m *testing.M) {
	if !strings.Contains(os.Getenv("GORACE"), "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=10"))
	}
	testscript.Main(m, map[string]func(){
		"party":       func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"paid-bundle": paidBundleCmd,
	})
}

// TestScripts runs every testdata/script/*.txtar.
func TestScripts(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests, not before them
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}
