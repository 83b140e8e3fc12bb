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
// Growth (growth_test.go): the same act on instances holding 10 and
// 10 000 transactions, at event 10 and 300 of one transaction, and with
// 10 and 10 000 more mandates held, in process over the real stores; each
// act also reports its read and write system calls (iometer_test.go).
// Growth/alternated runs each act on the 10- and the 10 000-transaction
// pair in turn, so that a drifting host slows both alike, and reports the
// ratios. Method and numbers: docs/performance.md, "Growth: the same act
// with history", "A third pass" and "A fourth pass".
//
// History (history_test.go): the acts and reads of every day (offer,
// acceptance, obligation, payment, the list pages, the approvals page, a
// timeline, export and verify of one transaction, serve's start) on a
// pair holding 10 transactions and on one holding 10 000 and 100 000
// (1 000 000 with -history.million; on the buyer's side only with
// -history.buyer-only), alternated, over histories package history
// generates. Method and numbers: docs/performance.md, "A year of
// history". Upgrade (upgrade_test.go): `party backup` of such a history,
// and the upgrade of it from one migration behind, which rewrites the
// largest table (docs/deploy.md, "Upgrading a large database"). Pages
// written (pages_test.go): which b-trees each of those acts writes, and
// how many pages, read back from the write-ahead log.
//
// Verification (verify_test.go): `party verify DIR` as a process over a
// 5 000-event bundle, next to the floor of its signatures and, when
// A202_REFERENCE_DIR names a checkout of a202-protocol/a202, the published
// Python reference verifier over the same directory
// (testdata/reference_verify.py imports it from there; none of its code is
// in this repository). Method and numbers: docs/performance.md, "party
// verify end to end".
package bench
