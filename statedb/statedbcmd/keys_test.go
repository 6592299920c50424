package statedbcmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// db help, and the help of a command that takes a key, end with each
// index of the program's tables with its key format and an example; when
// the program does not answer, they say so.
func TestHelpShowsKeys(t *testing.T) {
	s := newServer(t)
	for _, args := range [][]string{{"--help"}, {"help"}, {"get", "--help"}, {"prefix", "--help"}} {
		out, _, err := run(t, t.Context(), append([]string{"--socket", s.socket}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{
			"The program's tables, and the key format of each index with an example:",
			"  routes\n",
			"    prefix     text (primary)\n",
			"    table      a non-negative integer, e.g. 1 (non-unique: db get prints every match)\n",
			"    covering   an IP address or prefix, e.g. 192.0.2.1 (longest prefix match: db lpm)\n",
			"    _revision  a revision, e.g. 1\n",
			"  rules\n",
			"Usage:",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	// A command without keys keeps its help.
	out, _, err := run(t, t.Context(), "--socket", s.socket, "tables", "--help")
	if err != nil || strings.Contains(out, "key format") || !strings.Contains(out, "List the tables") {
		t.Fatalf("tables --help: %v\n%s", err, out)
	}
	gone := filepath.Join(t.TempDir(), "gone.sock")
	out, _, err = run(t, t.Context(), "--socket", gone, "--help")
	if err != nil || !strings.Contains(out, "The program's tables and their key formats are listed here when it answers; now:") || !strings.Contains(out, "gone.sock") {
		t.Fatalf("--help without a program: %v\n%s", err, out)
	}
}
