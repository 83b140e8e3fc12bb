package peering

import "time"

// SetClock replaces the clock a Directory's Peers reckons its recheck by.
func SetClock(d *Directory, now func() time.Time) { d.now = now }
