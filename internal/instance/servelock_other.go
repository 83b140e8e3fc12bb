//go:build !unix

package instance

// LockServe is a no-op where flock is not available: party is built and
// run on Unix systems, and nothing here enforces one serve per directory.
func LockServe(dir string) (unlock func(), err error) { return func() {}, nil }
