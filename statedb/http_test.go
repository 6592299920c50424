package statedb

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func newHTTPFixture(t *testing.T) (*DB, RWTable[*testObject], *Client) {
	t.Helper()
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	wtxn := db.WriteTxn(tbl)
	for i, name := range []string{"alpha", "beta", "gamma"} {
		tbl.Insert(wtxn, &testObject{ID: uint64(i + 1), Name: name, Tags: []string{"all", name[:1]}})
	}
	wtxn.Commit()
	srv := httptest.NewServer(NewHTTPHandler(db))
	t.Cleanup(srv.Close)
	return db, tbl, NewClient(srv.URL, srv.Client())
}

func objectIDs(t *testing.T, objs []ObjectJSON) []uint64 {
	t.Helper()
	decoded, err := DecodeObjects[testObject](objs)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, o := range decoded {
		out = append(out, o.ID)
	}
	return out
}

func TestHTTPTablesDumpQuery(t *testing.T) {
	_, _, c := newHTTPFixture(t)
	ctx := context.Background()

	infos, err := c.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "objs" || infos[0].Objects != 3 || infos[0].Revision != 3 ||
		!slices.Equal(infos[0].Indexes, []string{"id", "tags", "name", RevisionIndex}) || !infos[0].Initialized {
		t.Fatalf("Tables = %+v", infos)
	}

	objs, err := c.Dump(ctx, "objs")
	if err != nil {
		t.Fatal(err)
	}
	if got := objectIDs(t, objs); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("Dump ids = %v", got)
	}

	cases := []struct {
		op    QueryOp
		index string
		key   string
		want  []uint64
	}{
		{QueryGet, "", "2", []uint64{2}},
		{QueryGet, "id", "0x3", []uint64{3}},
		{QueryGet, "tags", "all", []uint64{1}}, // get: the first only; list: every one
		{QueryList, "tags", "all", []uint64{1, 2, 3}},
		{QueryList, "tags", "b", []uint64{2}},
		{QueryPrefix, "name", "g", []uint64{3}},
		{QueryLowerBound, "id", "2", []uint64{2, 3}},
		{QueryLowerBound, RevisionIndex, "3", []uint64{3}},
		{QueryGet, "name", "nope", nil},
		{QueryLast, "name", "", []uint64{3}},
		{QueryLast, "tags", "a", []uint64{3}},
		{QueryLast, RevisionIndex, "", []uint64{3}},
		{QueryReverseLowerBound, "name", "beta", []uint64{2, 1}},
		{QueryReverseLowerBound, "tags", "b", []uint64{2, 3, 2, 1, 1}},
		{QueryReverseLowerBound, RevisionIndex, "2", []uint64{2, 1}},
	}
	for _, tc := range cases {
		objs, err := c.Query(ctx, "objs", tc.op, tc.index, tc.key)
		if err != nil {
			t.Fatalf("%s %s=%s: %v", tc.op, tc.index, tc.key, err)
		}
		if got := objectIDs(t, objs); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s=%s: got %v, want %v", tc.op, tc.index, tc.key, got, tc.want)
		}
	}
}

func TestHTTPBadRequests(t *testing.T) {
	_, _, c := newHTTPFixture(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		run     func() error
		status  int
		mention string
	}{
		{"unknown table", func() error { _, err := c.Dump(ctx, "nope"); return err }, 404, `no table "nope"`},
		{"unknown table query", func() error { _, err := c.Query(ctx, "nope", QueryGet, "", "1"); return err }, 404, `"nope"`},
		{"unknown index", func() error { _, err := c.Query(ctx, "objs", QueryGet, "color", "1"); return err }, 400, `no index "color"`},
		{"bad key", func() error { _, err := c.Query(ctx, "objs", QueryGet, "id", "one"); return err }, 400, `bad key "one"`},
		{"bad revision", func() error { _, err := c.Query(ctx, "objs", QueryLowerBound, RevisionIndex, "-1"); return err }, 400, `bad revision`},
		{"bad op", func() error { _, err := c.Query(ctx, "objs", "scan", "id", "1"); return err }, 400, `unknown operation "scan"`},
		{"lpm on another index", func() error { _, err := c.Query(ctx, "objs", QueryLPM, "name", "10.0.0.1"); return err }, 400, `needs an LPM index`},
		{"bad key for last", func() error { _, err := c.Query(ctx, "objs", QueryLast, "id", "one"); return err }, 400, `bad key "one"`},
	}
	for _, tc := range cases {
		err := tc.run()
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || !strings.Contains(apiErr.Message, tc.mention) {
			t.Errorf("%s: got %v, want HTTP %d mentioning %q", tc.name, err, tc.status, tc.mention)
		}
	}
}

func TestHTTPWatchAndDisconnect(t *testing.T) {
	db, tbl, c := newHTTPFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var seen []ChangeJSON
	wrote := false
	for ch, err := range c.Watch(ctx, "objs") {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, ch)
		if len(seen) == 3 && !wrote {
			// The initial objects arrived; now change the table.
			wrote = true
			wtxn := db.WriteTxn(tbl)
			tbl.Delete(wtxn, &testObject{ID: 1})
			tbl.Insert(wtxn, &testObject{ID: 4, Name: "delta"})
			wtxn.Commit()
		}
		if len(seen) == 5 {
			break // disconnect mid-stream
		}
	}
	if len(seen) != 5 || !seen[3].Deleted || seen[3].Revision != 4 || seen[4].Deleted || seen[4].Revision != 5 {
		t.Fatalf("changes = %+v", seen)
	}
	// The server notices the disconnect and unregisters its iterator.
	deadline := time.Now().Add(5 * time.Second)
	for tbl.(*table[*testObject]).trackers.count.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("change iterator of the disconnected stream was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHTTPUnixSocket(t *testing.T) {
	db, _ := newTestTable(t, "objs")
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/db/", http.StripPrefix("/db", NewHTTPHandler(db)))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()

	c := NewUnixClient(sock, "/db")
	defer c.http.CloseIdleConnections()
	infos, err := c.Tables(context.Background())
	if err != nil || len(infos) != 1 || infos[0].Name != "objs" {
		t.Fatalf("Tables over unix socket = %v, %v", infos, err)
	}
}

func TestRenderTable(t *testing.T) {
	_, _, c := newHTTPFixture(t)
	objs, err := c.Dump(context.Background(), "objs")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := RenderTable(&b, objs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "NAME") || !strings.HasSuffix(lines[0], "REVISION") {
		t.Fatalf("table:\n%s", b.String())
	}
	if f := strings.Fields(lines[2]); f[0] != "2" || f[len(f)-1] != "2" || !strings.Contains(lines[2], "beta") {
		t.Fatalf("row 2 = %q", lines[2])
	}
	// The HTTP API renders the same table.
	resp, err := c.get(context.Background(), "/tables/objs", map[string][]string{"format": {"table"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	if _, err := io.Copy(&sb, resp.Body); err != nil {
		t.Fatal(err)
	}
	if sb.String() != b.String() {
		t.Fatalf("HTTP table differs:\n%s\nvs\n%s", sb.String(), b.String())
	}
}

// TestHTTPStalledStreamIsDropped opens a change stream, reads a little and
// stops reading with the connection open, then deletes many objects: the
// server must drop the stream after its write timeout, unregister its change
// iterator and so free the graveyard, and a new client must be served.
func TestHTTPStalledStreamIsDropped(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	srv := httptest.NewServer(NewHTTPHandler(db, WithStreamWriteTimeout(200*time.Millisecond)))
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := io.WriteString(conn, "GET /tables/objs/changes HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := io.ReadFull(conn, buf); err != nil { // the status line: the stream is open
		t.Fatal(err)
	}
	m := tbl.(*table[*testObject])
	waitFor(t, "the stream's change iterator", func() bool { return m.trackers.count.Load() == 1 })

	// Stop reading. Each insert+delete pair is a delete the stream must see.
	payload := strings.Repeat("x", 4096)
	for i := range 2000 {
		wtxn := db.WriteTxn(tbl)
		tbl.Insert(wtxn, &testObject{ID: uint64(i), Name: payload})
		wtxn.Commit()
		wtxn = db.WriteTxn(tbl)
		tbl.Delete(wtxn, &testObject{ID: uint64(i)})
		wtxn.Commit()
	}
	waitFor(t, "the stalled stream to be dropped", func() bool { return m.trackers.count.Load() == 0 })
	// With no iterator left, the next commit (or here: the drop's Close)
	// frees the graveyard.
	wtxn := db.WriteTxn(tbl)
	wtxn.Commit()
	if info := m.info(db.ReadTxn()); info.GraveyardObjects != 0 || info.ChangeIterators != 0 {
		t.Fatalf("after the drop: %+v", info)
	}

	// A client that reconnects gets the table again and then changes.
	wtxn = db.WriteTxn(tbl)
	tbl.Insert(wtxn, &testObject{ID: 7, Name: "seven"})
	wtxn.Commit()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewClient(srv.URL, srv.Client())
	for ch, err := range c.Watch(ctx, "objs") {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Revision != 4001 || ch.Deleted {
			t.Fatalf("first change after reconnecting = %+v", ch)
		}
		break
	}
}

// The stream write timeout is DefaultStreamWriteTimeout, 10s, unless
// WithStreamWriteTimeout sets a positive one.
func TestStreamWriteTimeoutDefault(t *testing.T) {
	if DefaultStreamWriteTimeout != 10*time.Second {
		t.Fatalf("DefaultStreamWriteTimeout = %v, want the documented 10s", DefaultStreamWriteTimeout)
	}
	db := New()
	for _, tc := range []struct {
		opts []HTTPOption
		want time.Duration
	}{
		{nil, DefaultStreamWriteTimeout},
		{[]HTTPOption{WithStreamWriteTimeout(0)}, DefaultStreamWriteTimeout},
		{[]HTTPOption{WithStreamWriteTimeout(-time.Second)}, DefaultStreamWriteTimeout},
		{[]HTTPOption{WithStreamWriteTimeout(3 * time.Second)}, 3 * time.Second},
	} {
		if got := newHTTPHandler(db, tc.opts...).streamWriteTimeout; got != tc.want {
			t.Errorf("with %d options: stream write timeout %v, want %v", len(tc.opts), got, tc.want)
		}
	}
}
