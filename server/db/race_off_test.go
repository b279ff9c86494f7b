//go:build !race

package db

// raceDetector: this test binary runs under the race detector, whose instrumentation allocates.
const raceDetector = false
