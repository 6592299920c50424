package netnsutil

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestResolve(t *testing.T) {
	tests := []struct {
		ref  string
		want NS
		bad  bool
	}{
		{"", "", false},
		{"blue", NamedDir + "/blue", false},
		{"/var/run/netns/red", "/var/run/netns/red", false},
		{"/proc/42/ns/net", "/proc/42/ns/net", false},
		{"..", "", true},
		{".", "", true},
		{"a\x00b", "", true},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.ref)
		if tt.bad {
			if !errors.Is(err, ErrBadRef) {
				t.Errorf("Resolve(%q) = %q, %v; want ErrBadRef", tt.ref, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
		}
	}
}

// Do with the current namespace just calls the function; a namespace
// that does not exist is an error naming it, and the function is not
// called.
func TestDo(t *testing.T) {
	called := false
	if err := NS("").Do(func() error { called = true; return nil }); err != nil || !called {
		t.Fatalf("Do in the current namespace: %v, called %v", err, called)
	}
	called = false
	err := NS("/nonexistent/netns").Do(func() error { called = true; return nil })
	if err == nil || called {
		t.Fatalf("Do in a missing namespace: %v, called %v", err, called)
	}
}
