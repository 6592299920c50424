package filesource

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/steadystate/steadystate/reflector"
)

// A file rewritten in place while it is decoded, to the same size and
// with its modification time put back (and no writer left holding it), is
// not taken: the version decoded is no longer the file. The next read
// takes the new bytes. The rewrite falls in the second block of the
// re-read, so that the comparison must go past the first.
func TestRewrittenInPlaceDuringDecode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	pad := make([]byte, 100<<10)
	for i := range pad {
		pad[i] = ' '
	}
	v1 := "a pad 0" + string(pad) + "\na x 1\n"
	v2 := "a pad 0" + string(pad) + "\na x 2\n"
	if err := os.WriteFile(path, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	decodes := 0
	cfg := Config[int]{Path: path, Logger: slog.New(slog.DiscardHandler), Decode: func(p string, data []byte) ([]reflector.Item[int], error) {
		decodes++
		if decodes == 1 {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(v2), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}
		return decodeLines(p, data)
	}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, retry := s.read(s.begin(), true, false); !retry {
		t.Fatal("a version rewritten in place while it was decoded was taken")
	}
	if _, _, retry := s.read(s.begin(), true, false); retry {
		t.Fatal("the rewritten file was not taken on the next read")
	}
	items, _, err := s.List(t.Context())
	if err != nil || len(items) != 2 || items[1].Value != 2 {
		t.Fatalf("items %v (%v), want x = 2", items, err)
	}
}
