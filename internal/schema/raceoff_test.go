//go:build !race

package schema

// raceEnabled: this test binary was built with -race.
const raceEnabled = false
