package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program runs for its duration without root and exits 0, leaving the
// files of the final desired state: one greeting changed, one removed.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	if code := run([]string{"--dir", dir, "--duration", "500ms"}); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(filepath.Join(dir, "world.txt"))
	if err != nil || string(b) != "Hello again, world\n" {
		t.Fatalf("world.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gopher.txt")); !os.IsNotExist(err) {
		t.Fatalf("gopher.txt was not removed: %v", err)
	}
	// A bad flag is an error, not a run.
	if code := run([]string{"--duration", "soon"}); code != 1 {
		t.Fatalf("bad flag: exit code %d, want 1", code)
	}
}
