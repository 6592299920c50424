package statedbcmd

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// program is a program's statedb API on a unix socket, which a test can
// stop and start again with a new database (a restart).
type program struct {
	db     *statedb.DB
	routes statedb.RWTable[*route]
	srv    *http.Server
}

// startProgram serves a new database with the routes given on socket.
func startProgram(t *testing.T, socket string, prefixes ...string) *program {
	t.Helper()
	p := &program{db: statedb.New()}
	var err error
	if p.routes, err = statedb.NewTable(p.db, "routes", prefixIndex, tableIndex, lpmIndex); err != nil {
		t.Fatal(err)
	}
	for _, pfx := range prefixes {
		p.insert(pfx)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.StripPrefix("/statedb", statedb.NewHTTPHandler(p.db)))
	p.srv = &http.Server{Handler: mux}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

func (p *program) insert(prefix string) {
	wtxn := p.db.WriteTxn(p.routes)
	p.routes.Insert(wtxn, &route{Prefix: prefix})
	wtxn.Commit()
}

// db watch follows the program across a restart: it says that the
// database is a new instance, lists the new one's contents (whose
// revisions start again, below the last one printed) and then its
// changes.
func TestWatchAcrossRestart(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "api.sock")
	first := startProgram(t, socket, "10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		cmd := New(Options{PathPrefix: "/statedb"})
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs([]string{"--socket", socket, "watch", "routes"})
		done <- cmd.ExecuteContext(ctx)
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; output:\n%s\nstderr:\n%s", what, out.String(), errOut.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the listing", func() bool { return strings.Count(out.String(), "\n") == 3 })

	// The program restarts with other routes.
	first.srv.Close()
	second := startProgram(t, socket, "203.0.113.0/24")
	waitFor("the new instance", func() bool { return strings.Contains(out.String(), "203.0.113.0/24") })
	second.insert("198.51.100.0/24")
	waitFor("the new instance's change", func() bool { return strings.Contains(out.String(), "198.51.100.0/24") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[3], "+ rev=1 ") || !strings.HasPrefix(lines[4], "+ rev=2 ") {
		t.Fatalf("output, want 3 listed, then the new instance's listing at rev=1 and its change at rev=2:\n%s", out.String())
	}
	want := "# a new instance of the program's database (ID " + second.db.ID() + ", was " + first.db.ID() + "): it restarted; listing routes again\n"
	if n := strings.Count(errOut.String(), want); n != 1 {
		t.Fatalf("stderr has %d times %q:\n%s", n, want, errOut.String())
	}
}

// watch --format json prints one ChangeJSON a line, across a restart too.
func TestWatchJSONAcrossRestart(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "api.sock")
	first := startProgram(t, socket, "10.0.0.0/8")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		cmd := New(Options{PathPrefix: "/statedb"})
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs([]string{"--socket", socket, "watch", "routes", "--format", "json"})
		done <- cmd.ExecuteContext(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "10.0.0.0/8") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	first.srv.Close()
	startProgram(t, socket, "203.0.113.0/24")
	for !strings.Contains(out.String(), "203.0.113.0/24") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := `{"revision":1,"object":{"prefix":"10.0.0.0/8","table":0,"status":{"kind":""}}}` + "\n" +
		`{"revision":1,"object":{"prefix":"203.0.113.0/24","table":0,"status":{"kind":""}}}` + "\n"
	if got := out.String(); got != want {
		t.Fatalf("output\n%s\nwant\n%s\nstderr:\n%s", got, want, errOut.String())
	}
}
