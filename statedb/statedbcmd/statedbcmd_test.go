package statedbcmd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type route struct {
	Prefix string `json:"prefix"`
	Table  int    `json:"table"`
	Status struct {
		Kind string `json:"kind"`
	} `json:"status"`
}

var prefixIndex = statedb.Index[*route, string]{
	Name:       "prefix",
	FromObject: func(r *route) index.KeySet { return index.NewKeySet(index.String(r.Prefix)) },
	FromKey:    index.String,
	Unique:     true,
}

var lpmIndex = statedb.LPMIndex[*route]{
	Name:       "covering",
	FromObject: func(r *route) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(r.Prefix)} },
}

var tableIndex = statedb.Index[*route, uint64]{
	Name:       "table",
	FromObject: func(r *route) index.KeySet { return index.NewKeySet(index.Uint64(uint64(r.Table))) },
	FromKey:    index.Uint64,
}

// server is a program's statedb API on TCP and on a unix socket.
type server struct {
	db     *statedb.DB
	routes statedb.RWTable[*route]
	tcp    *httptest.Server
	socket string
	init   func(statedb.WriteTxn) // the "loader" initializer of rules
	rules  statedb.RWTable[*route]
	// tablesAsked receives a value each time /tables is asked (if there is
	// room).
	tablesAsked chan struct{}
}

func newServer(t *testing.T) *server {
	s := &server{db: statedb.New()}
	var err error
	if s.routes, err = statedb.NewTable(s.db, "routes", prefixIndex, tableIndex, lpmIndex); err != nil {
		t.Fatal(err)
	}
	if s.rules, err = statedb.NewTable(s.db, "rules", prefixIndex); err != nil {
		t.Fatal(err)
	}
	wtxn := s.db.WriteTxn(s.routes, s.rules)
	for i, p := range []string{"10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24"} {
		r := &route{Prefix: p, Table: 100 + i%2}
		r.Status.Kind = "Done"
		s.routes.Insert(wtxn, r)
	}
	s.init = s.rules.RegisterInitializer(wtxn, "loader")
	wtxn.Commit()

	s.tablesAsked = make(chan struct{}, 1)
	api := statedb.NewHTTPHandler(s.db)
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.StripPrefix("/statedb", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
		if r.URL.Path == "/tables" {
			select {
			case s.tablesAsked <- struct{}{}:
			default:
			}
		}
	})))
	s.tcp = httptest.NewServer(mux)
	t.Cleanup(s.tcp.Close)

	s.socket = filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// run runs the db command with args and returns its output and error.
func run(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	cmd := New(Options{PathPrefix: "/statedb"})
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestCommands(t *testing.T) {
	s := newServer(t)
	addr := strings.TrimPrefix(s.tcp.URL, "http://")
	for _, conn := range [][]string{{"--addr", addr}, {"--socket", s.socket}} {
		t.Run(conn[0], func(t *testing.T) {
			for _, tt := range []struct {
				args []string
				want []string // lines the output must contain
				not  []string
			}{
				{[]string{"tables"}, []string{"NAME  ", "routes  3", "prefix,table,covering", "rules", "no (waiting for loader)"}, nil},
				{[]string{"lpm", "routes", "covering", "10.1.2.3"}, []string{"10.1.0.0/16"}, []string{"10.0.0.0/8", "192.0.2.0/24"}},
				{[]string{"lpm", "routes", "covering", "10.200.0.1"}, []string{"10.0.0.0/8"}, []string{"10.1.0.0/16"}},
				{[]string{"last", "routes", "prefix"}, []string{"192.0.2.0/24"}, []string{"10.1.0.0/16"}},
				{[]string{"last", "routes", "prefix", "10."}, []string{"10.1.0.0/16"}, []string{"192.0.2.0/24", "10.0.0.0/8"}},
				{[]string{"reverse-lowerbound", "routes", "prefix", "10.5"}, []string{"10.1.0.0/16", "10.0.0.0/8"}, []string{"192.0.2.0/24"}},
				{[]string{"show", "routes"}, []string{"PREFIX", "STATUS.KIND", "10.1.0.0/16", "192.0.2.0/24"}, nil},
				{[]string{"show", "routes", "--columns", "prefix,status.kind"}, []string{"PREFIX", "STATUS.KIND", "10.0.0.0/8"}, []string{"TABLE"}},
				{[]string{"get", "routes", "table", "101"}, []string{"10.1.0.0/16"}, []string{"10.0.0.0/8", "192.0.2.0/24"}},
				// A non-unique index: every match, not the first.
				{[]string{"get", "routes", "table", "100"}, []string{"10.0.0.0/8", "192.0.2.0/24"}, []string{"10.1.0.0/16"}},
				{[]string{"get", "routes", "covering", "10.1.2.3"}, []string{"10.1.0.0/16"}, []string{"10.0.0.0/8"}},
				{[]string{"prefix", "routes", "prefix", "10."}, []string{"10.0.0.0/8", "10.1.0.0/16"}, []string{"192.0.2.0/24"}},
				{[]string{"lowerbound", "routes", "prefix", "10.1"}, []string{"10.1.0.0/16", "192.0.2.0/24"}, []string{"10.0.0.0/8"}},
				{[]string{"get", "routes", "prefix", "192.0.2.0/24", "--format", "json"}, []string{`"revision":`, `"prefix": "192.0.2.0/24"`}, nil},
				{[]string{"show", "routes", "--format", "yaml"}, []string{"prefix: 10.0.0.0/8", "revision:"}, nil},
				{[]string{"tables", "--format", "json"}, []string{`"name": "routes"`, `"initialized": false`}, nil},
			} {
				out, _, err := run(t, t.Context(), append(conn, tt.args...)...)
				if err != nil {
					t.Fatalf("%v: %v", tt.args, err)
				}
				for _, w := range tt.want {
					if !strings.Contains(out, w) {
						t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out)
					}
				}
				for _, w := range tt.not {
					if strings.Contains(out, w) {
						t.Errorf("%v: output has %q:\n%s", tt.args, w, out)
					}
				}
			}
		})
	}
}

// Errors say what was wrong: an unknown table lists the tables, a bad
// column lists the fields, a bad key names the index, no address says
// which flag to give.
func TestErrors(t *testing.T) {
	s := newServer(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "nope"}, "(tables: routes, rules)"},
		{[]string{"show", "routes", "--columns", "bogus"}, `no object has a field "bogus" (fields: prefix, status, status.kind, table)`},
		{[]string{"get", "routes", "table", "x"}, `bad key "x"`},
		// A malformed key: the index's key format and an example.
		{[]string{"get", "routes", "table", "x"}, `(keys of index "table": a non-negative integer, e.g. 1)`},
		{[]string{"lowerbound", "routes", "covering", "x"}, `(keys of index "covering": an IP address or prefix, e.g. 192.0.2.1)`},
		{[]string{"get", "routes", "nope", "x"}, "nope"},
		{[]string{"lpm", "routes", "prefix", "10.1.2.3"}, "prefix"},
		{[]string{"lpm", "routes", "covering", "not-an-address"}, "not-an-address"},
		{[]string{"show", "routes", "--format", "xml"}, `--format "xml"`},
		{[]string{"initialized", "nope"}, `no table "nope" (tables: routes, rules)`},
	} {
		_, _, err := run(t, t.Context(), append([]string{"--socket", s.socket}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
	if _, _, err := run(t, t.Context(), "tables"); err == nil || !strings.Contains(err.Error(), "--socket PATH or --addr HOST:PORT") {
		t.Errorf("no address: %v", err)
	}
	if _, _, err := run(t, t.Context(), "tables", "--socket", s.socket, "--addr", "x:1"); err == nil {
		t.Error("--socket with --addr accepted")
	}
}

func TestInitialized(t *testing.T) {
	s := newServer(t)
	_, _, err := run(t, t.Context(), "--socket", s.socket, "initialized")
	var nie *NotInitializedError
	if !errors.As(err, &nie) || len(nie.Pending) != 1 || nie.Pending[0] != "rules (waiting for loader)" {
		t.Fatalf("initialized: %v", err)
	}
	if out, _, err := run(t, t.Context(), "--socket", s.socket, "initialized", "routes"); err != nil || out != "initialized\n" {
		t.Fatalf("initialized routes: %q, %v", out, err)
	}
	// --wait waits for the initializer: it is done only once the command
	// has asked twice (found it pending, then polled again).
	for len(s.tablesAsked) > 0 {
		<-s.tablesAsked
	}
	go func() {
		<-s.tablesAsked
		<-s.tablesAsked
		wtxn := s.db.WriteTxn(s.rules)
		s.init(wtxn)
		wtxn.Commit()
	}()
	if _, _, err := run(t, t.Context(), "--socket", s.socket, "initialized", "--wait", "10s"); err != nil {
		t.Fatalf("initialized --wait: %v", err)
	}
}

// Table and index names complete from the running program.
func TestCompletion(t *testing.T) {
	s := newServer(t)
	out, _, err := run(t, t.Context(), "__complete", "--socket", s.socket, "get", "")
	if err != nil || !strings.Contains(out, "routes\nrules\n") {
		t.Fatalf("table completion: %q, %v", out, err)
	}
	out, _, err = run(t, t.Context(), "__complete", "--socket", s.socket, "get", "routes", "")
	if err != nil || !strings.Contains(out, "prefix\ntable\n") {
		t.Fatalf("index completion: %q, %v", out, err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watch prints the objects and every change; when the server drops the
// stream it reconnects and goes on without printing anything twice.
func TestWatchReconnects(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	cl := statedb.NewClient(s.tcp.URL+"/statedb", nil)
	go func() { done <- watch(ctx, cl, "routes", "text", &out, &errOut) }()

	waitFor := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; output:\n%s\nstderr:\n%s", what, out.String(), errOut.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the listing", func(o string) bool { return strings.Count(o, "\n") == 3 })

	insert := func(p string) {
		wtxn := s.db.WriteTxn(s.routes)
		s.routes.Insert(wtxn, &route{Prefix: p})
		wtxn.Commit()
	}
	insert("203.0.113.0/24")
	waitFor("the insert", func(o string) bool { return strings.Contains(o, "203.0.113.0/24") })

	s.tcp.CloseClientConnections() // the server drops the stream
	waitFor("the reconnection", func(string) bool { return strings.Contains(errOut.String(), "reconnecting after revision") })
	insert("198.51.100.0/24")
	waitFor("the insert after the reconnection", func(o string) bool { return strings.Contains(o, "198.51.100.0/24") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 5 {
		t.Fatalf("%d lines, want 5 (3 listed, 2 inserted, none twice):\n%s", got, out.String())
	}
}
