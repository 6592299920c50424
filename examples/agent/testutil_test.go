package main

import (
	"bytes"
	"sync"

	"github.com/steadystate/steadystate/hive/health"
)

// healthLike is the health tree as the status report carries it.
type healthLike = health.Status

// syncBuffer is a bytes.Buffer safe for the agent's output goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
