package filesource

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// stillSame tells a file unchanged since a read from one changed in any
// way: a byte rewritten in place (size and time kept), a byte at the end
// of a large file (past the first blocks), a file grown, shrunk or
// replaced by a rename.
func TestStillSame(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	data := make([]byte, 200<<10+17) // several of stillSame's blocks
	for i := range data {
		data[i] = byte(i * 7)
	}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, change func(s snapshot), want bool) {
		t.Helper()
		write(data)
		s, _, err := readSnapshot(path)
		if err != nil {
			t.Fatal(err)
		}
		change(s)
		same, writing, err := s.stillSame(path)
		if err != nil || writing || same != want {
			t.Errorf("%s: same=%v writing=%v err=%v, want same=%v", what, same, writing, err, want)
		}
	}
	keepTime := func(s snapshot) {
		if err := os.Chtimes(path, s.info.ModTime(), s.info.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	check("unchanged", func(snapshot) {}, true)
	for _, at := range []int{0, 70 << 10, len(data) - 1} {
		check(fmt.Sprintf("byte %d rewritten in place", at), func(s snapshot) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{data[at] + 1}, int64(at)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			keepTime(s)
		}, false)
	}
	check("grown", func(s snapshot) { write(append(slices.Clone(data), 'x')); keepTime(s) }, false)
	check("shrunk", func(s snapshot) { write(data[:len(data)-1]); keepTime(s) }, false)
	check("replaced by a rename", func(s snapshot) {
		other := filepath.Join(dir, "g")
		if err := os.WriteFile(other, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, path); err != nil {
			t.Fatal(err)
		}
		keepTime(s)
	}, false)
	write(data)
	s, _, err := readSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if same, _, err := s.stillSame(path); same || err == nil {
		t.Errorf("gone: same=%v err=%v, want an error", same, err)
	}
}

// A FIFO in the file's place is refused at once: neither read blocks
// waiting for a writer.
func TestFIFORefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, err := readSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if _, _, err := readSnapshot(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("readSnapshot of a FIFO: %v, want not a regular file", err)
	}
	if same, _, err := s.stillSame(path); same || err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("stillSame of a FIFO: same=%v, %v, want not a regular file", same, err)
	}
}
