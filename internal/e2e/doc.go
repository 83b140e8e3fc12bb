// Package e2e runs two real `party serve` processes, each with its own
// state directory and keys, peered over HTTPS on loopback, and drives
// both agents over MCP Streamable HTTP through the published walkthrough.
// It also runs the README's "Your own instance" section as written, every
// command block of it (readme_test.go). It holds tests only.
package e2e
