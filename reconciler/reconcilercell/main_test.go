package reconcilercell

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// reconciler and hive the tests start must stop cleanly.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
