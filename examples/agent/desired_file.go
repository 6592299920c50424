package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/index"
)

// desiredFile is the schema of the desired-state file (YAML or JSON).
type desiredFile struct {
	Sysctls []*sysctl.Sysctl `json:"sysctls" yaml:"sysctls"`
	Routes  []*routes.Route  `json:"routes" yaml:"routes"`
	Rules   []*iptables.Rule `json:"rules" yaml:"rules"`
}

// decodeDesired parses a desired-state file: JSON if its name ends in
// .json, YAML otherwise. Unknown fields are errors, so that a typo does not
// silently drop a setting. An empty file is an empty desired state.
func decodeDesired(path string, data []byte) (*desiredFile, error) {
	var f desiredFile
	var err error
	if strings.EqualFold(filepath.Ext(path), ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&f)
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err = dec.Decode(&f); errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// validatable is a desired object: a pointer with a Validate method.
type validatable interface {
	comparable
	Validate() error
}

// validateAll validates objs of one kind and finds duplicates (two entries
// with the same primary key). Each error says where: "routes[2]: ...".
func validateAll[Obj validatable](kind string, objs []Obj, key func(Obj) index.Key) []error {
	var errs []error
	var zero Obj
	seen := map[string]int{}
	for i, obj := range objs {
		where := fmt.Sprintf("%s[%d]", kind, i)
		if obj == zero {
			errs = append(errs, fmt.Errorf("%s: empty entry", where))
			continue
		}
		if err := obj.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		k := string(key(obj))
		if prev, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate of %s[%d]", where, kind, prev))
			continue
		}
		seen[k] = i
	}
	return errs
}
