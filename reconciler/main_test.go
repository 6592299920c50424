package reconciler

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// reconciler the tests start must stop cleanly.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
