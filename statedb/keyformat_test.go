package statedb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// pathIndex keys objects by "NAME/ID": its text keys are whole keys for
// get, and "NAME/" is a prefix of them (PrefixFromString).
var pathIndex = Index[*testObject, string]{
	Name: "path",
	FromObject: func(o *testObject) index.KeySet {
		return index.NewKeySet(index.String(fmt.Sprintf("%s/%d", o.Name, o.ID)))
	},
	FromKey: index.String,
	FromString: func(s string) (index.Key, error) {
		name, id, ok := strings.Cut(s, "/")
		if _, err := strconv.ParseUint(id, 10, 64); !ok || name == "" || err != nil {
			return nil, errors.New("want NAME/ID")
		}
		return index.String(s), nil
	},
	PrefixFromString: func(s string) (index.Key, error) {
		if !strings.HasSuffix(s, "/") || strings.Count(s, "/") != 1 {
			return nil, errors.New("want NAME/")
		}
		return index.String(s), nil
	},
	KeyFormat:  "NAME/ID",
	KeyExample: "alpha/1",
	Unique:     true,
}

// TableInfo lists every index's key format: the index's own, or its key
// type's with an example that parses; the revision index's last.
func TestKeyFormats(t *testing.T) {
	db, _ := newTestTable(t, "objs", tagIndex, nameIndex, pathIndex)
	infos := db.TableInfos(db.ReadTxn())
	want := []KeyFormat{
		{Index: "id", Primary: true, Unique: true, Format: "a non-negative integer", Example: "1"},
		{Index: "tags", Format: "text"},
		{Index: "name", Unique: true, Format: "text"},
		{Index: "path", Unique: true, Format: "NAME/ID", Example: "alpha/1"},
		{Index: RevisionIndex, Unique: true, Format: "a revision", Example: "1"},
	}
	if got := infos[0].KeyFormats; !slices.Equal(got, want) {
		t.Fatalf("KeyFormats\n%+v\nwant\n%+v", got, want)
	}
	for _, f := range infos[0].KeyFormats {
		if f.Example == "" || f.Index == RevisionIndex {
			continue
		}
		if _, err := infos[0].query(db, f.Index, f.Example); err != nil {
			t.Errorf("index %s: its example %q does not parse: %v", f.Index, f.Example, err)
		}
	}
	for _, tc := range []struct {
		f    KeyFormat
		want string
	}{
		{KeyFormat{Format: "NAME/ID", Example: "alpha/1"}, "NAME/ID, e.g. alpha/1"},
		{KeyFormat{Format: "text"}, "text"},
		{KeyFormat{Example: "x"}, "e.g. x"},
		{KeyFormat{}, ""},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.f, got, tc.want)
		}
	}

	// The defaults of the other key types; an LPM index's.
	for _, tc := range []struct {
		got  KeyFormat
		want KeyFormat
	}{
		{Index[*testObject, bool]{Name: "b"}.keyFormat(), KeyFormat{Index: "b", Format: "true or false", Example: "true"}},
		{Index[*testObject, int16]{Name: "i"}.keyFormat(), KeyFormat{Index: "i", Format: "an integer", Example: "1"}},
		{Index[*testObject, uint8]{Name: "u"}.keyFormat(), KeyFormat{Index: "u", Format: "a non-negative integer", Example: "1"}},
		{Index[*testObject, [2]byte]{Name: "x"}.keyFormat(), KeyFormat{Index: "x"}},
		{LPMIndex[*testObject]{Name: "l", Unique: true}.keyFormat(), KeyFormat{Index: "l", Unique: true, LPM: true, Format: "an IP address or prefix", Example: "192.0.2.1"}},
	} {
		if tc.got != tc.want {
			t.Errorf("key format %+v, want %+v", tc.got, tc.want)
		}
	}
	// Their examples parse.
	for _, ex := range []func() error{
		func() error {
			_, err := Index[*testObject, bool]{Name: "b", FromKey: index.Bool}.fromString("true")
			return err
		},
		func() error {
			_, err := Index[*testObject, int16]{Name: "i", FromKey: func(i int16) index.Key { return index.Int64(int64(i)) }}.fromString("1")
			return err
		},
		func() error {
			_, err := Index[*testObject, uint8]{Name: "u", FromKey: func(u uint8) index.Key { return index.Key{u} }}.fromString("1")
			return err
		},
		func() error { _, err := LPMIndex[*testObject]{Name: "l"}.fromString("192.0.2.1"); return err },
	} {
		if err := ex(); err != nil {
			t.Errorf("a default example does not parse: %v", err)
		}
	}
}

// query runs a get of key in the named index of the table the info
// describes.
func (info TableInfo) query(db *DB, idx, key string) (int, error) {
	meta, _ := db.TableByName(info.Name)
	seq, err := meta.(anyTable).anyQuery(db.ReadTxn(), QueryGet, idx, key)
	if err != nil {
		return 0, err
	}
	n := 0
	for range seq {
		n++
	}
	return n, nil
}

// An example that does not parse fails NewTable: the help never shows a
// key that the index refuses.
func TestKeyExampleMustParse(t *testing.T) {
	bad := pathIndex
	bad.KeyExample = "alpha"
	db := New()
	_, err := NewTable(db, "objs", idIndex, bad)
	if !errors.Is(err, ErrInvalidIndex) || !strings.Contains(err.Error(), `KeyExample does not parse`) || errors.Is(err, ErrBadQuery) {
		t.Fatalf("NewTable with a bad KeyExample: %v, want ErrInvalidIndex", err)
	}
	badType := idIndex
	badType.Name, badType.KeyExample = "n", "one"
	if _, err := NewTable(db, "objs2", idIndex, badType); !errors.Is(err, ErrInvalidIndex) {
		t.Fatalf("NewTable with a KeyExample that is not a uint64: %v, want ErrInvalidIndex", err)
	}
}

// Prefix and last take a prefix of a key (PrefixFromString), get a whole
// key; a malformed key's error names the index's key format and example.
func TestPrefixFromStringAndKeyErrors(t *testing.T) {
	db, tbl := newTestTable(t, "objs", pathIndex)
	wtxn := db.WriteTxn(tbl)
	for i, name := range []string{"alpha", "beta", "beta", "gamma"} {
		tbl.Insert(wtxn, &testObject{ID: uint64(i + 1), Name: name})
	}
	wtxn.Commit()
	srv := httptest.NewServer(NewHTTPHandler(db))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, srv.Client())
	ctx := context.Background()

	for _, tc := range []struct {
		op   QueryOp
		key  string
		want []uint64
	}{
		{QueryPrefix, "beta/", []uint64{2, 3}},
		{QueryLast, "beta/", []uint64{3}},
		{QueryGet, "beta/3", []uint64{3}},
	} {
		objs, err := c.Query(ctx, "objs", tc.op, "path", tc.key)
		if err != nil {
			t.Fatalf("%s path %s: %v", tc.op, tc.key, err)
		}
		if got := objectIDs(t, objs); !slices.Equal(got, tc.want) {
			t.Errorf("%s path %s: %v, want %v", tc.op, tc.key, got, tc.want)
		}
	}
	for _, tc := range []struct {
		op      QueryOp
		index   string
		key     string
		mention string
	}{
		{QueryGet, "path", "beta/", `bad key "beta/": want NAME/ID (keys of index "path": NAME/ID, e.g. alpha/1)`},
		{QueryPrefix, "path", "beta", `bad key prefix "beta": want NAME/ (keys of index "path": NAME/ID, e.g. alpha/1)`},
		{QueryGet, "id", "one", `(keys of index "id": a non-negative integer, e.g. 1)`},
		{QueryLowerBound, RevisionIndex, "x", `(keys of index "_revision": a revision, e.g. 1)`},
	} {
		_, err := c.Query(ctx, "objs", tc.op, tc.index, tc.key)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.mention) {
			t.Errorf("%s %s %q: %v, want HTTP 400 mentioning %q", tc.op, tc.index, tc.key, err, tc.mention)
		}
	}
}

// Each DB has an ID of its own, which every answer of the API carries and
// a change stream reports.
func TestDBID(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	other := New()
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(db.ID()) || db.ID() == other.ID() {
		t.Fatalf("IDs %q and %q: want 16 hex digits, distinct", db.ID(), other.ID())
	}
	srv := httptest.NewServer(NewHTTPHandler(db))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/tables", "/tables/objs", "/tables/objs/query?key=1", "/tables/nope", "/tables/objs/query?index=nope"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(IDHeader); got != db.ID() {
			t.Errorf("GET %s (HTTP %d): %s %q, want %q", path, resp.StatusCode, IDHeader, got, db.ID())
		}
	}

	wtxn := db.WriteTxn(tbl)
	tbl.Insert(wtxn, &testObject{ID: 1, Name: "one"})
	wtxn.Commit()
	c := NewClient(srv.URL, srv.Client())
	s, err := c.OpenChanges(context.Background(), "objs")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.DBID != db.ID() {
		t.Fatalf("stream DBID %q, want %q", s.DBID, db.ID())
	}
	for ch, err := range s.All() {
		if err != nil || ch.Revision != 1 {
			t.Fatalf("first change %+v, %v", ch, err)
		}
		break
	}
	if _, err := c.OpenChanges(context.Background(), "nope"); err == nil {
		t.Fatal("OpenChanges of an unknown table succeeded")
	}
}
