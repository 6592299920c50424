package statedb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// RenderTable writes objects (as the HTTP API returns them) as an aligned
// text table: one row per object, one column per top-level field in the
// order the fields first appear, plus the revision. Nested objects are shown
// compactly as key=value pairs; a status {"kind":"Error","error":"..."}
// reads "Error: ...". The CLI, the HTTP API (?format=table) and tests all
// use it, so they show the same thing.
func RenderTable(w io.Writer, objs []ObjectJSON) error {
	var columns []string
	seen := map[string]bool{}
	rows := make([]map[string]string, 0, len(objs))
	for _, o := range objs {
		keys, values, err := decodeOrdered(o.Object)
		if err != nil {
			return fmt.Errorf("object at revision %d: %w", o.Revision, err)
		}
		row := map[string]string{"REVISION": fmt.Sprint(o.Revision)}
		for i, k := range keys {
			if !seen[k] {
				seen[k] = true
				columns = append(columns, k)
			}
			row[k] = renderValue(values[i])
		}
		rows = append(rows, row)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := make([]string, 0, len(columns)+1)
	for _, c := range columns {
		header = append(header, strings.ToUpper(c))
	}
	header = append(header, "REVISION")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, row := range rows {
		cells := make([]string, 0, len(columns)+1)
		for _, c := range columns {
			cells = append(cells, row[c])
		}
		cells = append(cells, row["REVISION"])
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// decodeOrdered returns the top-level fields of a JSON object in order.
func decodeOrdered(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return []string{"value"}, []json.RawMessage{raw}, nil
	}
	var keys []string
	var values []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys = append(keys, tok.(string))
		values = append(values, v)
	}
	return keys, values, nil
}

// renderValue shows one field: strings bare, objects as key=value pairs
// (a status as its kind and error), anything else as JSON.
func renderValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		if kind, ok := m["kind"].(string); ok {
			if e, ok := m["error"].(string); ok && e != "" {
				return kind + ": " + e
			}
			return kind
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			b, _ := json.Marshal(m[k])
			parts = append(parts, k+"="+strings.Trim(string(b), `"`))
		}
		return strings.Join(parts, " ")
	}
	return string(raw)
}
