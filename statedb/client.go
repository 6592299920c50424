package statedb

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Client is a typed client of the HTTP inspection API (see NewHTTPHandler).
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client of the API served at baseURL (for example
// "http://127.0.0.1:8080/statedb"). A nil httpClient means
// http.DefaultClient.
func NewClient(baseURL string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), http: httpClient}
}

// NewUnixClient returns a client of the API served on the unix socket at
// socketPath, under pathPrefix (often "").
func NewUnixClient(socketPath, pathPrefix string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
	}
	return NewClient("http://unix"+pathPrefix, &http.Client{Transport: tr})
}

// APIError is an error answer of the API.
type APIError struct {
	StatusCode int
	Message    string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("statedb API: %s (HTTP %d)", e.Message, e.StatusCode)
}

func (c *Client) get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e errorJSON
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		return nil, &APIError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}

func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := c.get(ctx, path, query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("statedb API: decoding %s: %w", path, err)
	}
	return nil
}

// Tables describes every table.
func (c *Client) Tables(ctx context.Context) ([]TableInfo, error) {
	var out []TableInfo
	return out, c.getJSON(ctx, "/tables", nil, &out)
}

// Dump returns every object of a table, in primary key order.
func (c *Client) Dump(ctx context.Context, table string) ([]ObjectJSON, error) {
	var out []ObjectJSON
	return out, c.getJSON(ctx, "/tables/"+url.PathEscape(table), nil, &out)
}

// Query runs a lookup: op is one of the QueryOp values, indexName "" means
// the primary index, key is given as text.
func (c *Client) Query(ctx context.Context, table string, op QueryOp, indexName, key string) ([]ObjectJSON, error) {
	var out []ObjectJSON
	q := url.Values{"op": {string(op)}, "key": {key}}
	if indexName != "" {
		q.Set("index", indexName)
	}
	return out, c.getJSON(ctx, "/tables/"+url.PathEscape(table)+"/query", q, &out)
}

// Watch streams a table's changes: first every object as an insert, then
// each change as it is committed, until ctx is cancelled or the connection
// fails (yielded as the error of the last element). Stopping the iteration
// closes the connection. OpenChanges does the same and also says which
// database serves the stream.
func (c *Client) Watch(ctx context.Context, table string) iter.Seq2[ChangeJSON, error] {
	return func(yield func(ChangeJSON, error) bool) {
		s, err := c.OpenChanges(ctx, table)
		if err != nil {
			yield(ChangeJSON{}, err)
			return
		}
		defer s.Close()
		for ch, err := range s.All() {
			if !yield(ch, err) {
				return
			}
		}
	}
}

// ChangeStream is an open change stream of a table (see OpenChanges).
type ChangeStream struct {
	// DBID is the ID of the database that serves the stream (DB.ID, from
	// the Statedb-Id header; "" if the server does not send it). A client
	// that reconnects and finds another ID talks to a new database (the
	// program restarted): its revisions started again, and its first
	// changes are its whole contents.
	DBID string

	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
}

// OpenChanges opens the change stream of table: first every object as an
// insert, then each change as it is committed. Its errors are those of the
// request (an *APIError for an unknown table). Close the stream when done.
func (c *Client) OpenChanges(ctx context.Context, table string) (*ChangeStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.get(ctx, "/tables/"+url.PathEscape(table)+"/changes", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &ChangeStream{DBID: resp.Header.Get(IDHeader), ctx: ctx, cancel: cancel, body: resp.Body}, nil
}

// All yields the stream's changes until its context is cancelled, Close is
// called, or the connection fails (yielded as the error of the last
// element; a stream that the server ended yields no error). Iterate it
// once.
func (s *ChangeStream) All() iter.Seq2[ChangeJSON, error] {
	return func(yield func(ChangeJSON, error) bool) {
		sc := bufio.NewScanner(s.body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ch ChangeJSON
			if err := json.Unmarshal(sc.Bytes(), &ch); err != nil {
				yield(ChangeJSON{}, fmt.Errorf("statedb API: decoding change: %w", err))
				return
			}
			if !yield(ch, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil && s.ctx.Err() == nil {
			yield(ChangeJSON{}, err)
		}
	}
}

// Close ends the stream and closes its connection.
func (s *ChangeStream) Close() {
	s.cancel()
	s.body.Close()
}

// DecodeObjects decodes the objects of an API answer into Obj values.
func DecodeObjects[Obj any](objs []ObjectJSON) ([]Obj, error) {
	out := make([]Obj, 0, len(objs))
	for _, o := range objs {
		var v Obj
		if err := json.Unmarshal(o.Object, &v); err != nil {
			return nil, fmt.Errorf("decoding object at revision %d: %w", o.Revision, err)
		}
		out = append(out, v)
	}
	return out, nil
}
