package filesource

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// loadedCounts records Loaded.
type loadedCounts struct {
	NopMetrics
	loaded  int
	changed []int
}

func (c *loadedCounts) Loaded(_ string, _, changed int) {
	c.loaded++
	c.changed = append(c.changed, changed)
}

// A List's read of a new version (taken without events) reports it as the
// Watch's read would: the revision moves once, the Loaded metric and the
// "Desired state loaded" line count what changed; a List that finds the
// file unchanged reads nothing and keeps the revision.
func TestListReadCounts(t *testing.T) {
	for _, equal := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "f")
		var logs bytes.Buffer
		metrics := &loadedCounts{}
		cfg := Config[int]{Path: path, Decode: decodeLines, Metrics: metrics, SettleTime: time.Hour,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		if equal {
			cfg.Equal = func(a, b int) bool { return a == b }
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Each version settled long ago: a List reads it at once.
		write := func(data string) {
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-2 * time.Hour)
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
		write("a x 1\na y 2\nb z 3\n")
		if _, rev, err := s.List(context.Background()); err != nil || rev != 1 {
			t.Fatalf("equal %v: first List at %d, %v; want 1", equal, rev, err)
		}
		write("a x 1\na y 20\nb w 4\n") // y changed, z gone, w new
		items, rev, err := s.List(context.Background())
		want := []reflector.Item[int]{{Table: "a", Key: "x", Value: 1}, {Table: "a", Key: "y", Value: 20}, {Table: "b", Key: "w", Value: 4}}
		if err != nil || rev != 2 || !slices.Equal(items, want) {
			t.Fatalf("equal %v: second List: %v at %d, %v; want %v at 2", equal, items, rev, err, want)
		}
		changed := 4 // without Equal every key of the version is put
		if equal {
			changed = 3
		}
		if metrics.loaded != 2 || metrics.changed[1] != changed {
			t.Fatalf("equal %v: Loaded %d times, changed %v; want 2 times, the second %d", equal, metrics.loaded, metrics.changed, changed)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, "Desired state loaded") || !strings.Contains(last, fmt.Sprintf(" changed=%d ", changed)) {
			t.Fatalf("equal %v: the last line %q; want Desired state loaded with changed=%d", equal, last, changed)
		}
		// Unchanged: nothing read, the same revision.
		if _, rev, err := s.List(context.Background()); err != nil || rev != 2 || metrics.loaded != 2 {
			t.Fatalf("equal %v: an unchanged List at %d (%v), Loaded %d times; want 2, 2", equal, rev, err, metrics.loaded)
		}
	}
}

// Decode may keep the data it is given (Config.Decode): no later read
// changes it.
func TestDecodeKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	var kept [][]byte
	cfg := Config[int]{Path: path, Logger: slog.New(slog.DiscardHandler), Decode: func(p string, data []byte) ([]reflector.Item[int], error) {
		kept = append(kept, data)
		return decodeLines(p, data)
	}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for i := range 20 {
		v := fmt.Sprintf("a x %d\na y %d\n", i, i*7)
		if i%2 == 1 {
			v = fmt.Sprintf("a x %d\n", i) // shorter: a buffer kept for reuse would show
		}
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, retry := s.read(s.begin(), true, i%2 == 0); retry {
			t.Fatal("the version was not read")
		}
		versions = append(versions, v)
	}
	if len(kept) != len(versions) {
		t.Fatalf("%d decodes of %d versions", len(kept), len(versions))
	}
	for i, data := range kept {
		if string(data) != versions[i] {
			t.Fatalf("the data of version %d, kept by Decode, is now %q; want %q", i, data, versions[i])
		}
	}
}
