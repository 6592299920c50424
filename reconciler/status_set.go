package reconciler

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// StatusSet holds the statuses of several reconcilers in one object, for a
// table that more than one reconciler works on (routes programmed into the
// kernel and announced to a routing daemon, say). It is a value: Set
// returns a new set and never changes the one it was called on, so a
// stored object's set is as immutable as the object.
//
// A set made by NewStatusSet or Pending stands for a new desired version:
// every member is Pending under one new ID, including reconcilers it has
// never heard of. Each reconciler reads and writes its own member, by
// name, in its Config:
//
//	GetObjectStatus: func(r *Route) reconciler.Status { return r.Status.Get("kernel") },
//	SetObjectStatus: func(r *Route, s reconciler.Status) *Route { r.Status = r.Status.Set("kernel", s); return r },
//
// and the writer of desired objects makes every member pending whenever
// the desired part changes; with a DesiredWriter, by giving it
//
//	SetObjectStatus: func(r *Route, _ reconciler.Status) *Route { r.Status = r.Status.Pending(); return r },
//
// Because each member keeps the ID of the version it was made pending for,
// a reconciler writes its result whenever the desired state it applied is
// still current, whatever the other reconcilers wrote meanwhile: none is
// starved by another's status writes.
//
// The zero StatusSet is Unset for every member: the reconciler does not act
// on it.
type StatusSet struct {
	id      uint64    // of the desired version; 0 in the zero set
	since   time.Time // when the version was made pending
	members []namedStatus
}

// namedStatus is one member of a StatusSet; members are sorted by name.
type namedStatus struct {
	name   string
	status Status
}

// NewStatusSet returns a set in which every member is Pending, under a new
// ID.
func NewStatusSet() StatusSet { return StatusSet{id: nextStatusID(), since: time.Now()} }

// Pending returns a set in which every member is Pending again, under a new
// ID: what a writer sets for a new desired version.
func (s StatusSet) Pending() StatusSet { return NewStatusSet() }

// Get returns the status of the named member: the one Set stored, or the
// set's Pending status if none was (Unset for the zero set).
func (s StatusSet) Get(name string) Status {
	if i, ok := s.find(name); ok {
		return s.members[i].status
	}
	if s.id == 0 {
		return Status{}
	}
	return Status{Kind: StatusKindPending, UpdatedAt: s.since, ID: s.id}
}

// Set returns a copy of the set with the named member's status st.
func (s StatusSet) Set(name string, st Status) StatusSet {
	i, ok := s.find(name)
	members := make([]namedStatus, 0, len(s.members)+1)
	members = append(members, s.members[:i]...)
	members = append(members, namedStatus{name, st})
	if ok {
		i++
	}
	s.members = append(members, s.members[i:]...)
	return s
}

func (s StatusSet) find(name string) (int, bool) {
	return slices.BinarySearchFunc(s.members, name, func(m namedStatus, name string) int { return strings.Compare(m.name, name) })
}

// String lists the members that have a status of their own, by name, and
// says that the others are pending: "kernel: Done, bgp: Error: timeout
// (others Pending)". A set with no member of its own is "Pending" (or ""
// for the zero set).
func (s StatusSet) String() string {
	if len(s.members) == 0 {
		return s.Get("").Kind.String()
	}
	var b strings.Builder
	for i, m := range s.members {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.name + ": " + m.status.String())
	}
	if s.id != 0 {
		b.WriteString(" (others Pending)")
	}
	return b.String()
}

// statusSetJSON is the JSON and YAML form of a StatusSet.
type statusSetJSON struct {
	ID      uint64            `json:"id,omitempty" yaml:"id,omitempty"`
	Since   time.Time         `json:"since,omitzero" yaml:"since,omitempty"`
	Members map[string]Status `json:"members,omitempty" yaml:"members,omitempty"`
}

func (s StatusSet) toJSON() statusSetJSON {
	j := statusSetJSON{ID: s.id, Since: s.since}
	if len(s.members) > 0 {
		j.Members = make(map[string]Status, len(s.members))
		for _, m := range s.members {
			j.Members[m.name] = m.status
		}
	}
	return j
}

// MarshalJSON writes {"id": ..., "since": ..., "members": {"name": Status}}.
func (s StatusSet) MarshalJSON() ([]byte, error) { return json.Marshal(s.toJSON()) }

// MarshalYAML writes the same fields as MarshalJSON.
func (s StatusSet) MarshalYAML() (any, error) { return s.toJSON(), nil }

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *StatusSet) UnmarshalJSON(b []byte) error {
	var j statusSetJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = StatusSet{id: j.ID, since: j.Since}
	for name, st := range j.Members {
		s.members = append(s.members, namedStatus{name, st})
	}
	slices.SortFunc(s.members, func(a, b namedStatus) int { return strings.Compare(a.name, b.name) })
	return nil
}
