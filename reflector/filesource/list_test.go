package filesource

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// decodeLines reads "TABLE KEY VALUE" lines.
func decodeLines(_ string, data []byte) ([]reflector.Item[int], error) {
	var items []reflector.Item[int]
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		v, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, err
		}
		items = append(items, reflector.Item[int]{Table: f[0], Key: f[1], Value: v})
	}
	return items, nil
}

// List returns the first version in table and key order as its diff
// sorted it, and lets it go; a version taken before the List is listed
// instead of the first (with Equal or without).
func TestListFirstVersion(t *testing.T) {
	newSource := func(equal bool) (*Source[int], string) {
		path := filepath.Join(t.TempDir(), "f")
		cfg := Config[int]{Path: path, Decode: decodeLines, Logger: slog.New(slog.DiscardHandler)}
		if equal {
			cfg.Equal = func(a, b int) bool { return a == b }
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s, path
	}
	take := func(s *Source[int], path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, retry := s.read(s.begin(), true, false); retry {
			t.Fatal("the version was not read")
		}
	}
	for _, equal := range []bool{false, true} {
		s, path := newSource(equal)
		take(s, path, "b z 1\na y 2\nb a 3\n")
		take(s, path, "b z 1\na y 2\nb a 4\n")
		items, rev, err := s.List(context.Background())
		want := []reflector.Item[int]{{Table: "a", Key: "y", Value: 2}, {Table: "b", Key: "a", Value: 4}, {Table: "b", Key: "z", Value: 1}}
		if err != nil || rev != 2 || !slices.Equal(items, want) {
			t.Errorf("equal %v, two versions: %v at %d, %v; want %v at 2", equal, items, rev, err, want)
		}

		s, path = newSource(equal)
		take(s, path, "b z 1\na y 2\nb a 3\n")
		want = []reflector.Item[int]{{Table: "a", Key: "y", Value: 2}, {Table: "b", Key: "a", Value: 3}, {Table: "b", Key: "z", Value: 1}}
		for range 2 { // the first version, then from the map
			items, rev, err = s.List(context.Background())
			if err != nil || rev != 1 || !slices.Equal(items, want) || s.first != nil {
				t.Errorf("equal %v, one version: %v at %d, %v (first kept: %v); want %v at 1", equal, items, rev, err, s.first != nil, want)
			}
		}
	}
}

// A first List of a file good at once reads it without a watch (closing
// one waits for the kernel); a file not there yet is waited for with one.
func TestListWatchesOnlyToWait(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("a x 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // settled long ago
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config[int]{Path: path, Decode: decodeLines, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	items, rev, err := s.List(context.Background())
	if err != nil || rev != 1 || len(items) != 1 {
		t.Fatalf("List: %v, %d, %v; want one item at revision 1", items, rev, err)
	}
	if n := s.watches.Load(); n != 0 {
		t.Fatalf("a List of a good file started %d watches, want none", n)
	}

	missing := filepath.Join(dir, "later")
	s, err = New(Config[int]{Path: missing, Decode: decodeLines, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	listed := make(chan error, 1)
	go func() {
		_, rev, err := s.List(context.Background())
		if err == nil && rev != 1 {
			err = fmt.Errorf("revision %d, want 1", rev)
		}
		listed <- err
	}()
	// The List waits in its watch; a rename into place ends it.
	for s.watches.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.WriteFile(tmp, []byte("a y 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, missing); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-listed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("List did not return after the file came")
	}
	if n := s.watches.Load(); n != 1 {
		t.Fatalf("a List that waited started %d watches, want 1", n)
	}
}
