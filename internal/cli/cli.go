// Package cli implements the party command line. Each subcommand is a thin
// layer over a library package; cmd/party only calls Main.
package cli

import (
	"fmt"
	"io"
	"sort"
)

type command struct {
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdin io.Reader, stdout, stderr io.Writer) int) {
	commands[name] = command{summary: summary, run: run}
}

// Main runs the command line given its arguments (without the program
// name) and returns the process exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "party: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

// runSubcommand runs the subcommand of cmd ("party budget") that args[0]
// names, given the rest of args; no subcommand, a request for help or an
// unknown one is answered with cmd's usage.
func runSubcommand(cmd, usage string, subs map[string]func(args []string) int, args []string, stdout, stderr io.Writer) int {
	known := func(sub string) bool { _, ok := subs[sub]; return ok }
	if code, done := pickSubcommand(cmd, usage, args, known, stdout, stderr); done {
		return code
	}
	return subs[args[0]](args[1:])
}

// pickSubcommand answers args of cmd that name no subcommand known to
// it: none, a request for help, or an unknown one get cmd's usage, and
// done is true with the exit status. Otherwise args[0] is the
// subcommand; commands whose subcommands share their flags (party agent,
// party key) call it directly.
func pickSubcommand(cmd, usage string, args []string, known func(sub string) bool, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2, true
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0, true
	}
	if !known(args[0]) {
		fmt.Fprintf(stderr, "%s: unknown subcommand %q\n\n%s", cmd, args[0], usage)
		return 2, true
	}
	return 0, false
}

// isHelp reports whether arg asks a command for its help, in any of the
// spellings party and package flag take.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "party: an A202 instance for one organisation")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: party <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'party <command> -h' for a command's flags.")
}
