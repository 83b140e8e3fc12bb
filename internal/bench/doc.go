// Package bench holds measurements of the whole stack, run only as
// benchmarks (go test -run '^$' -bench . ./internal/bench). The package has
// no tests, so an ordinary `go test ./...` runs nothing here.
//
// Formation (formation_test.go): two party instances served in process by
// daemon.Run, each with its own state directory, keys and listeners,
// talking HTTPS and A2A over loopback, their agents driven over MCP
// Streamable HTTP with bearer tokens. Method and numbers: docs/performance.md,
// "Formation over loopback".
//
// Verification (verify_test.go): `party verify DIR` as a process over a
// 5 000-event bundle, next to the floor of its signatures and, when
// A202_REFERENCE_DIR names a checkout of a202-protocol/a202, the published
// Python reference verifier over the same directory
// (testdata/reference_verify.py imports it from there; none of its code is
// in this repository). Method and numbers: docs/performance.md, "party
// verify end to end".
package bench
