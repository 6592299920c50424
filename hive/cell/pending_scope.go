package cell

import "sync"

// PendingScope reports to a health scope that opens later: a component
// built at Invoke time (a reconciler, a reflector) is given a PendingScope
// as its health, and the job that runs it opens the scope under the job's
// own when the job starts (the job's scope does not exist before). Reports
// made before Open are dropped; the components report only from their Run.
// The zero value is ready to use and safe for concurrent use.
type PendingScope struct {
	mu    sync.Mutex
	scope Health
}

// Open opens the scope name under parent; later reports go there.
func (s *PendingScope) Open(parent Health, name string) {
	scope := parent.NewScope(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scope = scope
}

func (s *PendingScope) get() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scope
}

// OK reports to the scope, once open.
func (s *PendingScope) OK(status string) {
	if h := s.get(); h != nil {
		h.OK(status)
	}
}

// Degraded reports to the scope, once open.
func (s *PendingScope) Degraded(reason string, err error) {
	if h := s.get(); h != nil {
		h.Degraded(reason, err)
	}
}

// Stopped reports to the scope, once open.
func (s *PendingScope) Stopped(reason string) {
	if h := s.get(); h != nil {
		h.Stopped(reason)
	}
}
