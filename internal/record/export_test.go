package record

// ObserveWorkingSets has f told the size of every working set the engines
// of this process build (objects held, mandates), with its transaction,
// until the returned function is called.
func ObserveWorkingSets(f func(txn string, n, mandates int)) func() {
	testingOnlyWorkingSet.Store(&f)
	return func() { testingOnlyWorkingSet.Store(nil) }
}
