package statedbcell

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// hive the tests start must stop its jobs.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
