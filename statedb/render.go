package statedb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// RenderTable writes objects (as the HTTP API returns them) as an aligned
// text table: one row per object, one column per field, plus the revision.
// The CLI, the HTTP API (?format=table) and tests all use it, so they show
// the same thing.
//
// It knows nothing of the objects' types: it reads their JSON. Fields of
// nested objects become columns of their own named by their path, so an
// object {"prefix":"10.0.0.0/8","status":{"kind":"Error","error":"boom"}}
// has the columns PREFIX, STATUS.KIND and STATUS.ERROR. Columns appear in
// the order of the fields, a field that only some objects have next to the
// one it follows in them. Strings are shown bare, null as nothing, arrays
// of strings, numbers and booleans joined by commas, other arrays as JSON.
// An object that is not a JSON object is the one column VALUE.
func RenderTable(w io.Writer, objs []ObjectJSON) error {
	var columns []string
	rows := make([]map[string]string, 0, len(objs))
	for _, o := range objs {
		var fields []field
		if err := flatten(&fields, "", o.Object); err != nil {
			return fmt.Errorf("object at revision %d: %w", o.Revision, err)
		}
		row := make(map[string]string, len(fields))
		prev := -1 // the column of the row's previous field
		for _, f := range fields {
			i := slices.Index(columns, f.name)
			if i < 0 {
				i = prev + 1
				columns = slices.Insert(columns, i, f.name)
			}
			prev = i
			row[f.name] = f.value
		}
		rows = append(rows, row)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := make([]string, 0, len(columns)+1)
	for _, c := range columns {
		header = append(header, strings.ToUpper(c))
	}
	fmt.Fprintln(tw, strings.Join(append(header, "REVISION"), "\t"))
	for i, row := range rows {
		cells := make([]string, 0, len(columns)+1)
		for _, c := range columns {
			cells = append(cells, row[c])
		}
		fmt.Fprintln(tw, strings.Join(append(cells, fmt.Sprint(objs[i].Revision)), "\t"))
	}
	return tw.Flush()
}

// field is one column of one row.
type field struct{ name, value string }

// flatten appends the fields of the JSON value raw to fields: the fields of
// an object under their names prefixed with prefix (nested objects
// recursively, their names joined with dots), any other value as one field
// named prefix ("value" at the top).
func flatten(fields *[]field, prefix string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		name := prefix
		if name == "" {
			name = "value"
		}
		*fields = append(*fields, field{name, renderValue(raw)})
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the '{'
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		name := tok.(string)
		if prefix != "" {
			name = prefix + "." + name
		}
		if err := flatten(fields, name, v); err != nil {
			return err
		}
	}
	return nil
}

// renderValue shows a JSON value that is not an object.
func renderValue(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as written, not as float64
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			switch e.(type) {
			case string, json.Number, bool:
				parts[i] = fmt.Sprint(e)
			default:
				return compactJSON(raw)
			}
		}
		return strings.Join(parts, ",")
	}
	return compactJSON(raw)
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
