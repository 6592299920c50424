package routes

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind (a reconciler
// that was not stopped, a namespace helper that did not return).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
