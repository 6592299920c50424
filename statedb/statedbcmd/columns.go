package statedbcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/statedb"
)

// writeObjects prints objects as a table (statedb.RenderTable, as the HTTP
// API's ?format=table), JSON or YAML, with only the given columns if any.
func writeObjects(w io.Writer, objs []statedb.ObjectJSON, format string, columns []string) error {
	if len(columns) > 0 {
		var err error
		if objs, err = selectColumns(objs, columns); err != nil {
			return err
		}
	}
	switch format {
	case "json":
		return writeJSON(w, objs)
	case "yaml":
		plain := make([]any, 0, len(objs))
		for _, o := range objs {
			var v any
			if err := json.Unmarshal(o.Object, &v); err != nil {
				return err
			}
			plain = append(plain, map[string]any{"revision": o.Revision, "object": v})
		}
		return yaml.NewEncoder(w).Encode(plain)
	default:
		return statedb.RenderTable(w, objs)
	}
}

// selectColumns returns the objects with only the named fields, in the
// order named. A name is a field of the object or a dotted path into
// nested objects, matched without regard to case; a name that no object
// has is an error that lists the names there are.
func selectColumns(objs []statedb.ObjectJSON, columns []string) ([]statedb.ObjectJSON, error) {
	found := make([]bool, len(columns))
	out := make([]statedb.ObjectJSON, 0, len(objs))
	var available []string
	for _, o := range objs {
		var buf bytes.Buffer
		buf.WriteByte('{')
		n := 0
		for i, col := range columns {
			v, ok := lookup(o.Object, strings.Split(col, "."))
			if !ok {
				continue
			}
			found[i] = true
			if n > 0 {
				buf.WriteByte(',')
			}
			name, _ := json.Marshal(col)
			buf.Write(name)
			buf.WriteByte(':')
			buf.Write(v)
			n++
		}
		buf.WriteByte('}')
		out = append(out, statedb.ObjectJSON{Revision: o.Revision, Object: buf.Bytes()})
		available = paths(available, "", o.Object)
	}
	for i, ok := range found {
		if !ok && len(objs) > 0 {
			return nil, fmt.Errorf("--columns: no object has a field %q (fields: %s)", columns[i], strings.Join(available, ", "))
		}
	}
	return out, nil
}

// lookup returns the value at path in the JSON object raw.
func lookup(raw json.RawMessage, path []string) (json.RawMessage, bool) {
	if len(path) == 0 {
		return raw, true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil, false
	}
	for name, v := range fields {
		if strings.EqualFold(name, path[0]) {
			return lookup(v, path[1:])
		}
	}
	return nil, false
}

// paths adds the field paths of the JSON object raw to have (once each).
func paths(have []string, prefix string, raw json.RawMessage) []string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return have
	}
	for name, v := range fields {
		p := prefix + name
		if !slices.Contains(have, p) {
			have = append(have, p)
		}
		if len(v) > 0 && v[0] == '{' {
			have = paths(have, p+".", v)
		}
	}
	slices.Sort(have)
	return have
}
