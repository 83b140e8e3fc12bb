package principal

// SetStopRotation sets the seam a principal key rotation calls after each
// step (testingOnlyStopRotation) and returns a function restoring it.
func SetStopRotation(f func(step string) error) func() {
	old := testingOnlyStopRotation
	testingOnlyStopRotation = f
	return func() { testingOnlyStopRotation = old }
}
