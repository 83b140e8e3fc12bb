package cli_test

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/partyd/party/internal/cli"
)

// TestMain lets testscript scripts run "party" as a command: the test
// binary re-executes itself with cli.Main as its main function.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"party": func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs every testdata/script/*.txtar.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}
