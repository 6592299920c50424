package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// desiredFile is a desired-state file (YAML or JSON) decoded: a list of
// objects of each kind, under the kind's key (sysctls, routes, rules).
type desiredFile struct {
	objects map[string][]any // by kind's file key; nil entries are empty ones
	lines   map[string][]int // by kind's file key: each entry's line (YAML only)
}

// of returns the objects of kind k.
func (f *desiredFile) of(k agentKind) []any { return f.objects[k.fileKey()] }

// kindByFileKey returns the kind of a file key.
func kindByFileKey(key string) (agentKind, bool) {
	for _, k := range kinds {
		if k.fileKey() == key {
			return k, true
		}
	}
	return nil, false
}

// fileKeys lists the kinds' file keys: "sysctls, routes, rules".
func fileKeys() string { return strings.Join(fileKeyList(), ", ") }

// fileKeyList is the kinds' file keys, in the order of kinds.
func fileKeyList() []string {
	var keys []string
	for _, k := range kinds {
		keys = append(keys, k.fileKey())
	}
	return keys
}

// decodeDesired parses a desired-state file: JSON if its name ends in
// .json, YAML otherwise. Unknown fields are errors, so that a typo does not
// silently drop a setting. An empty or whitespace-only file is an error
// (errEmptyDesired): it is what a writer leaves half-way, so it never means
// "nothing desired"; `{}` does.
func decodeDesired(path string, data []byte) (*desiredFile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errEmptyDesired)
	}
	f := desiredFile{objects: map[string][]any{}, lines: map[string][]int{}}
	var err error
	if strings.EqualFold(filepath.Ext(path), ".json") {
		err = decodeJSONFile(data, &f)
	} else {
		err = decodeYAML(path, data, &f)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// decodeYAML decodes a YAML desired file entry by entry, so that each
// error says where, as LINE: KIND[i].FIELD: problem, and names no Go type.
// A file of the block shape whose every entry decodes is read straight
// into its objects (decodeBlockDirect); any other file, and any error,
// through the library's nodes.
func decodeYAML(path string, data []byte, f *desiredFile) error {
	if decodeBlockDirect(data, f) {
		return nil
	}
	return decodeYAMLNodes(data, f)
}

// decodeYAMLNodes is decodeYAML through the library's nodes (made by
// parseBlockYAML when the file is of its shape).
func decodeYAMLNodes(data []byte, f *desiredFile) error {
	doc, ok := parseBlockYAML(data)
	if !ok {
		doc = &yaml.Node{}
		if err := yaml.Unmarshal(data, doc); err != nil {
			return err
		}
	}
	return decodeYAMLDoc(doc, f)
}

// decodeYAMLDoc decodes a YAML desired file's document node.
func decodeYAMLDoc(doc *yaml.Node, f *desiredFile) error {
	if len(doc.Content) == 0 {
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping with %s", top.Line, fileKeys())
	}
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		if prev, dup := seen[key.Value]; dup {
			errs = append(errs, fmt.Errorf("line %d: %s: given again (first on line %d)", key.Line, key.Value, prev))
			continue
		}
		seen[key.Value] = key.Line
		k, ok := kindByFileKey(key.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: %s: unknown key (known: %s)", key.Line, key.Value, fileKeys()))
			continue
		}
		objs, lines, err := k.decodeYAML(val)
		f.objects[k.fileKey()], f.lines[k.fileKey()] = objs, lines
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// decodeJSONFile decodes a JSON desired file: an object of the kinds'
// lists; an unknown key or field is an error.
func decodeJSONFile(data []byte, f *desiredFile) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(top)) {
		k, ok := kindByFileKey(key)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key (known: %s)", key, fileKeys()))
			continue
		}
		objs, err := k.decodeJSON(top[key])
		f.objects[key] = objs
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// decodeList decodes the list of kind in node, checking each entry's field
// names against T's yaml tags (status is not desired state), and returns
// each entry's line too.
func decodeList[T any](kind string, node *yaml.Node) ([]*T, []int, error) {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil, nil, nil
	}
	if node.Kind != yaml.SequenceNode {
		return nil, nil, fmt.Errorf("line %d: %s: want a list", node.Line, kind)
	}
	known := yamlFields[T]()
	var errs []error
	out := make([]*T, 0, len(node.Content))
	lines := make([]int, 0, len(node.Content))
	for i, item := range node.Content {
		where := func() string { return fmt.Sprintf("%s[%d]", kind, i) } // for errors only
		if item.Kind == yaml.ScalarNode && item.Tag == "!!null" {
			out, lines = append(out, nil), append(lines, item.Line) // validateAll reports it
			continue
		}
		if item.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("line %d: %s: want a mapping of fields", item.Line, where()))
			continue
		}
		bad := false
		for j := 0; j+1 < len(item.Content); j += 2 {
			if k := item.Content[j]; !slices.Contains(known, k.Value) {
				errs = append(errs, fmt.Errorf("line %d: %s.%s: unknown field (known: %s)", k.Line, where(), k.Value, strings.Join(known, ", ")))
				bad = true
			}
		}
		if bad {
			continue
		}
		obj := new(T)
		if err := item.Decode(obj); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %s", item.Line, where(), yamlMessage(err)))
			continue
		}
		out, lines = append(out, obj), append(lines, item.Line)
	}
	return out, lines, errors.Join(errs...)
}

// yamlFields lists the field names of T in YAML, without status.
func yamlFields[T any]() []string {
	var names []string
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		if name, ok := yamlName(rt.Field(i)); ok {
			names = append(names, name)
		}
	}
	return names
}

// yamlName is the name of a struct field in a desired entry (the yaml
// tag's name, else the lower-cased field name), or false for a field an
// entry does not set: unexported, "-", or the status.
func yamlName(sf reflect.StructField) (string, bool) {
	if !sf.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(sf.Name)
	}
	return name, name != "-" && name != "status"
}

// yamlMessage is err without yaml's "unmarshal errors" framing and Go type
// names.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			if at := strings.Index(m, " into "); at >= 0 {
				m = m[:at]
			}
			msgs[i] = m
		}
		return strings.Join(msgs, "; ")
	}
	return err.Error()
}

// errEmptyDesired is the error of an empty or whitespace-only desired file.
var errEmptyDesired = errors.New("the file is empty; write `{}` to remove all desired state")

// validatable is a desired object: a pointer with a Validate method.
type validatable interface {
	comparable
	Validate() error
}

// validateAll validates objs of one kind and finds duplicates (two entries
// with the same primary key). Each error says where: "line 7: routes[2]:
// ..." (the line from lines, each entry's, if known).
// It returns each object's key (its position in seen's work, so that a
// caller naming the objects by key formats none twice).
func validateAll[Obj validatable](kind string, objs []Obj, key func(Obj) string, lines []int) ([]string, []error) {
	var errs []error
	var zero Obj
	keys := make([]string, len(objs))
	seen := make(map[string]int, len(objs))
	for i, obj := range objs {
		where := func() string { // for errors only
			if i < len(lines) && lines[i] > 0 {
				return fmt.Sprintf("line %d: %s[%d]", lines[i], kind, i)
			}
			return fmt.Sprintf("%s[%d]", kind, i)
		}
		if obj == zero {
			errs = append(errs, fmt.Errorf("%s: empty entry", where()))
			continue
		}
		if err := obj.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where(), err))
			continue
		}
		k := key(obj)
		keys[i] = k
		if prev, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate of %s[%d]", where(), kind, prev))
			continue
		}
		seen[k] = i
	}
	return keys, errs
}
