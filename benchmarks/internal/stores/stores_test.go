package stores

import "testing"

// TestStores: every implementation stores, finds, iterates and aborts alike.
func TestStores(t *testing.T) {
	objs := []*Object{{ID: 3, Name: "a"}, {ID: 1, Name: "a"}, {ID: 2, Name: "b"}}
	for _, impl := range Databases {
		for _, secondary := range []bool{false, true} {
			s, err := impl.New(secondary)
			if err != nil {
				t.Fatal(err)
			}
			s.Write(objs)
			s.InsertAbort([]*Object{{ID: 9, Name: "c"}})
			if got := s.Lookup([]uint64{1, 2, 3, 9}); got != 3 {
				t.Errorf("%s: Lookup found %d, want 3 (9 was aborted)", impl.Name, got)
			}
			if got := s.Iterate(); got != 3 {
				t.Errorf("%s: Iterate saw %d, want 3", impl.Name, got)
			}
		}
	}
	m := NewMap()
	m.Write(objs)
	if got := m.Lookup([]uint64{1, 4}); got != 1 {
		t.Errorf("map: Lookup found %d, want 1", got)
	}
}
