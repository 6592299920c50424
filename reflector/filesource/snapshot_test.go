package filesource

import (
	"os"
	"path/filepath"
	"testing"
)

// The lease test that tells a writer is still at work.
func TestOpenForWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	_, writing, err := readSnapshot(path)
	if err != nil || !writing {
		t.Fatalf("open for writing: writing=%v, %v", writing, err)
	}
	w.Close()
	if _, writing, err = readSnapshot(path); err != nil || writing {
		t.Fatalf("closed: writing=%v, %v", writing, err)
	}
}
