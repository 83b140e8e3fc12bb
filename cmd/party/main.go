// Command party runs one organisation's A202 instance and its tools.
//
// See the README for the subcommands; `party help` lists them.
package main

import (
	"os"

	"github.com/partyd/party/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
