//go:build !race

package record_test

// raceEnabled: this test binary was built with -race.
const raceEnabled = false
