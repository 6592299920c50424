package statedb

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// TableInfo describes a table in a snapshot.
type TableInfo struct {
	Name                string   `json:"name"`
	Objects             int      `json:"objects"`
	Revision            Revision `json:"revision"`
	Indexes             []string `json:"indexes"`
	Initialized         bool     `json:"initialized"`
	PendingInitializers []string `json:"pendingInitializers,omitempty"`
	GraveyardObjects    int      `json:"graveyardObjects"`
	ChangeIterators     int      `json:"changeIterators"`
	// KeyFormats says how each index's keys are written as text, in the
	// order of Indexes.
	KeyFormats []KeyFormat `json:"keyFormats,omitempty"`
}

// QueryOp is the kind of lookup of an untyped query.
type QueryOp string

// The lookups of Table, by name (see also any_table_ops.go).
const (
	QueryGet        QueryOp = "get"
	QueryList       QueryOp = "list"
	QueryPrefix     QueryOp = "prefix"
	QueryLowerBound QueryOp = "lowerbound"
)

// The HTTP inspection API. The embedding program mounts the handler where it
// likes (a TCP listener, a unix socket, under a path prefix with
// http.StripPrefix). Every endpoint is read-only and answers JSON:
//
//	GET /tables                        []TableInfo
//	GET /tables/{table}                every object: []{"revision","object"}
//	                                   (?format=table: a text table, see
//	                                   RenderTable; also for query)
//	GET /tables/{table}/query?op=&index=&key=
//	                                   op is get, list (default), prefix,
//	                                   lowerbound, reverse-lowerbound, last
//	                                   (an empty key: the index's last
//	                                   object) or lpm (LPM indexes only);
//	                                   index defaults to the primary index;
//	                                   key is parsed by the index's
//	                                   FromString (for prefix and last:
//	                                   PrefixFromString; an LPM index's:
//	                                   an address or a prefix)
//	GET /tables/{table}/changes        newline-delimited JSON: every object as
//	                                   an insert, then each change as it is
//	                                   committed, until the client goes away
//
// Errors are {"error": "..."} with 404 for an unknown table and 400 for a
// bad query (a malformed key's error names the index's key format and an
// example; TableInfo.KeyFormats lists them all). Op get answers the first
// object with the key only, one of several on a non-unique index: list
// answers every one.
//
// Every answer carries the header Statedb-Id (IDHeader): the database's ID
// (DB.ID). Revisions compare only within one ID, so a client that
// reconnects, to a change stream say, and finds another ID knows that the
// program restarted with a new database and lists again.
//
// A change stream must keep up. Its change iterator advances each time the
// stream takes the next batch of changes, and deletes committed meanwhile
// are kept for it, so a client that stops reading would otherwise pin every
// later delete in memory. Each batch (the first one is the whole table) must
// therefore be written within the stream write timeout
// (DefaultStreamWriteTimeout, see WithStreamWriteTimeout), or the server
// ends the stream and frees what it held: a stream holds back at most the
// deletes of one write timeout. A client that was dropped reconnects and
// starts again from a full listing.

// IDHeader is the header of every answer of the API that carries the
// database's ID (DB.ID).
const IDHeader = "Statedb-Id"

// DefaultStreamWriteTimeout is how long a change stream may take to write
// one batch of changes before it is dropped.
const DefaultStreamWriteTimeout = 10 * time.Second

// HTTPOption configures NewHTTPHandler.
type HTTPOption func(*httpHandler)

// WithStreamWriteTimeout sets how long a change stream may take to write one
// batch of changes (and the first listing) before the server drops it. The
// default is DefaultStreamWriteTimeout; d <= 0 keeps the default.
func WithStreamWriteTimeout(d time.Duration) HTTPOption {
	return func(h *httpHandler) {
		if d > 0 {
			h.streamWriteTimeout = d
		}
	}
}

// NewHTTPHandler returns the inspection API of db.
func NewHTTPHandler(db *DB, opts ...HTTPOption) http.Handler {
	return newHTTPHandler(db, opts...).routes()
}

func newHTTPHandler(db *DB, opts ...HTTPOption) *httpHandler {
	h := &httpHandler{db: db, streamWriteTimeout: DefaultStreamWriteTimeout}
	for _, o := range opts {
		o(h)
	}
	return h
}

func (h *httpHandler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tables", h.tables)
	mux.HandleFunc("GET /tables/{table}", h.dump)
	mux.HandleFunc("GET /tables/{table}/query", h.query)
	mux.HandleFunc("GET /tables/{table}/changes", h.changes)
	id := h.db.ID()
	return recoverHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(IDHeader, id)
		mux.ServeHTTP(w, r)
	}))
}

type httpHandler struct {
	db                 *DB
	streamWriteTimeout time.Duration
}

// ObjectJSON is one object in the API's answers.
type ObjectJSON struct {
	Revision Revision        `json:"revision"`
	Object   json.RawMessage `json:"object"`
}

// ChangeJSON is one line of the changes stream.
type ChangeJSON struct {
	Revision Revision        `json:"revision"`
	Deleted  bool            `json:"deleted,omitempty"`
	Object   json.RawMessage `json:"object"`
}

type errorJSON struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorJSON{Error: err.Error()})
}

func (h *httpHandler) table(w http.ResponseWriter, r *http.Request) (anyTable, bool) {
	name := r.PathValue("table")
	meta, ok := h.db.TableByName(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("no table %q", name))
		return nil, false
	}
	return meta.(anyTable), true
}

func (h *httpHandler) tables(w http.ResponseWriter, r *http.Request) {
	infos := h.db.TableInfos(h.db.ReadTxn())
	if infos == nil {
		infos = []TableInfo{}
	}
	writeJSON(w, http.StatusOK, infos)
}

func (h *httpHandler) dump(w http.ResponseWriter, r *http.Request) {
	t, ok := h.table(w, r)
	if !ok {
		return
	}
	h.writeObjects(w, r, t.anyAll(h.db.ReadTxn()))
}

func (h *httpHandler) query(w http.ResponseWriter, r *http.Request) {
	t, ok := h.table(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	txn := h.db.ReadTxn()
	idx := q.Get("index")
	if idx == "" {
		idx = t.info(txn).Indexes[0]
	}
	seq, err := t.anyQuery(txn, QueryOp(q.Get("op")), idx, q.Get("key"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	h.writeObjects(w, r, seq)
}

func (h *httpHandler) writeObjects(w http.ResponseWriter, r *http.Request, seq func(func(any, Revision) bool)) {
	out := []ObjectJSON{}
	for obj, rev := range seq {
		b, err := json.Marshal(obj)
		if err != nil {
			writeError(w, http.StatusInternalServerError, fmt.Errorf("encoding object at revision %d: %w", rev, err))
			return
		}
		out = append(out, ObjectJSON{Revision: rev, Object: b})
	}
	if r.URL.Query().Get("format") == "table" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := RenderTable(w, out); err != nil {
			fmt.Fprintf(w, "error: %v\n", err)
		}
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *httpHandler) changes(w http.ResponseWriter, r *http.Request) {
	t, ok := h.table(w, r)
	if !ok {
		return
	}
	meta, _ := h.db.TableByName(r.PathValue("table"))
	wtxn := h.db.WriteTxn(meta)
	it, err := t.anyChanges(wtxn)
	wtxn.Commit()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	defer it.Close()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	ctx := r.Context()
	for {
		changes, watch := it.next(h.db.ReadTxn())
		// The whole batch, flush included, within one deadline: a client
		// that reads too slowly is dropped (see the package doc above).
		if err := rc.SetWriteDeadline(time.Now().Add(h.streamWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		for c, rev := range changes {
			b, err := json.Marshal(c.Object)
			if err != nil {
				b, _ = json.Marshal(errorJSON{Error: err.Error()})
			}
			if err := enc.Encode(ChangeJSON{Revision: rev, Deleted: c.Deleted, Object: b}); err != nil {
				return // the client went away or could not keep up
			}
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		// No deadline while waiting for changes: an idle stream is fine.
		_ = rc.SetWriteDeadline(time.Time{})
		select {
		case <-ctx.Done():
			return
		case <-watch:
		}
	}
}

// recoverHandler turns a panic in a handler into a 500 answer: the API must
// never take the program down.
func recoverHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				slog.Error("statedb: panic in HTTP handler", "path", r.URL.Path, "panic", v)
				writeError(w, http.StatusInternalServerError, fmt.Errorf("internal error: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
