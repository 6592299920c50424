package main

import (
	"bytes"
	"encoding/json"
	"slices"
)

// encodeObject is an object's value in etcd (`fleet apply` encodes a
// whole desired file): its JSON without status, members in key order, so
// that equal objects have equal values. It is the object's json.Marshal
// with the status member dropped and the members sorted, bytes for bytes
// what a map of the members would marshal to (encodeObjectViaMap),
// without decoding and encoding again. (File mode needs no encoding: see
// fileObject.)
func encodeObject(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	members, ok := splitMembers(b)
	if !ok {
		return encodeObjectViaMap(b)
	}
	members = slices.DeleteFunc(members, func(m member) bool { return string(m.key) == `"status"` })
	slices.SortFunc(members, func(a, b member) int { return bytes.Compare(a.key[1:len(a.key)-1], b.key[1:len(b.key)-1]) })
	out := make([]byte, 0, len(b))
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.key...)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), nil
}

// encodeObjectViaMap is encodeObject for any JSON object b: decoded into a
// map of its members, status deleted, encoded again (json.Marshal sorts a
// map's keys).
func encodeObjectViaMap(b []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	delete(fields, "status")
	return json.Marshal(fields)
}

// member is a member of a JSON object: its key (quoted) and its value.
type member struct{ key, value []byte }

// splitMembers splits json.Marshal's output of a struct, an object
// without spaces, into its members. ok is false for anything else, and
// for keys with escapes, whose order as bytes might not be their order as
// strings (the caller then takes the slow path).
func splitMembers(b []byte) (members []member, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, false
	}
	rest := b[1 : len(b)-1]
	for len(rest) > 0 {
		n := stringEnd(rest)
		if n < 0 || bytes.IndexByte(rest[:n], '\\') >= 0 || n >= len(rest) || rest[n] != ':' {
			return nil, false
		}
		key := rest[:n]
		rest = rest[n+1:]
		v := valueEnd(rest)
		if v <= 0 {
			return nil, false
		}
		members = append(members, member{key: key, value: rest[:v]})
		rest = rest[v:]
		if len(rest) > 0 {
			if rest[0] != ',' {
				return nil, false
			}
			rest = rest[1:]
		}
	}
	return members, true
}

// stringEnd returns the length of the JSON string at the start of b
// (quotes included), or -1.
func stringEnd(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return -1
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// valueEnd returns the length of the JSON value at the start of b (up to
// the ',' or the end that follows it at depth 0), or -1.
func valueEnd(b []byte) int {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			n := stringEnd(b[i:])
			if n < 0 {
				return -1
			}
			i += n - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return -1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	if depth != 0 {
		return -1
	}
	return len(b)
}
