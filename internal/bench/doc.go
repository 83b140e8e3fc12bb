// Package bench holds measurements of the whole stack, run only as
// benchmarks (go test -run '^$' -bench . ./internal/bench): two party
// instances served in process by daemon.Run, each with its own state
// directory, keys and listeners, talking HTTPS and A2A over loopback, their
// agents driven over MCP Streamable HTTP with bearer tokens. The package has
// no tests, so an ordinary `go test ./...` runs nothing here. The method
// and the numbers are in docs/performance.md, "Formation over loopback".
package bench
