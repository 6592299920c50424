package reconcilertest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// fakeTB stands for a test whose failures are the subject of a test: it
// records Errorf and Fatalf (which ends the goroutine, as in a real test)
// and passes everything else to the real test.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

// run runs body as a test would, in a goroutine of its own so that Fatalf
// ends only body, and returns the failures.
func (f *fakeTB) run(body func(tb testing.TB)) []string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures
}
