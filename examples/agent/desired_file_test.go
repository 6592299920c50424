package main

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeDesiredErrors(t *testing.T) {
	cases := []struct {
		name, path, data, want string
	}{
		{"unknown field", "d.yaml", "routes:\n  - prefix: 10.0.0.0/8\n    typo: 1\n", "d.yaml: line 3: routes[0].typo: unknown field (known: prefix, via, dev, type, table, metric)"},
		{"bad prefix", "d.yaml", "routes:\n  - prefix: 10.0.0.0/8\n  - prefix: 10.0.0.0/33\n", "d.yaml: line 3: routes[1]: "},
		{"status is not desired", "d.yaml", "sysctls:\n  - name: a.b\n    value: \"1\"\n    status: {}\n", "line 4: sysctls[0].status: unknown field"},
		{"not a list", "d.yaml", "rules: 5\n", "d.yaml: line 1: rules: want a list"},
		{"unknown top key", "d.yaml", "routs: []\n", "line 1: routs: unknown key (known: sysctls, routes, rules)"},
		{"twice", "d.yaml", "routes: []\nroutes: []\n", "line 2: routes: given again (first on line 1)"},
		{"no Go type names", "d.yaml", "routes:\n  - prefix: [1]\n", "line 2: routes[0]: line 2: cannot unmarshal !!seq"},
		{"json unknown field", "d.json", `{"sysctls":[{"name":"a.b","vlue":"1"}]}`, `unknown field "vlue"`},
		{"not yaml", "d.yaml", "sysctls: [\n", "d.yaml"},
	}
	for _, tc := range cases {
		_, err := decodeDesired(tc.path, []byte(tc.data))
		if err != nil && strings.Contains(err.Error(), " into ") {
			t.Errorf("%s: %v names a Go type", tc.name, err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// Empty is what a writer leaves half-way: an error; `{}` empties.
	for _, data := range []string{"", " \n\t\n", "\n"} {
		for _, path := range []string{"d.yaml", "d.json"} {
			if _, err := decodeDesired(path, []byte(data)); !errors.Is(err, errEmptyDesired) || !strings.Contains(err.Error(), "write `{}` to remove all desired state") {
				t.Errorf("%s %q: %v, want errEmptyDesired", path, data, err)
			}
		}
	}
	for _, path := range []string{"d.yaml", "d.json"} {
		f, err := decodeDesired(path, []byte("{}\n"))
		if err != nil || len(f.of(kinds[0]))+len(f.of(kinds[1]))+len(f.of(kinds[2])) != 0 {
			t.Fatalf("%s {}: %+v, %v", path, f, err)
		}
	}
}

func TestValidateAll(t *testing.T) {
	f, err := decodeDesired("d.yaml", []byte(`
routes:
  - prefix: 10.0.0.0/8
    type: blackhole
  - prefix: 10.0.0.0/8
    type: blackhole
  -
  - prefix: 10.1.2.3/8
    type: blackhole
`))
	if err != nil {
		t.Fatal(err)
	}
	routesKind, _ := kindByFileKey("routes")
	_, errs := routesKind.validate(f.of(routesKind), f.lines["routes"])
	text := ""
	for _, e := range errs {
		text += e.Error() + "\n"
	}
	for _, want := range []string{"line 5: routes[1]: duplicate of routes[0]", "line 7: routes[2]: empty entry", "line 8: routes[3]:"} {
		if !strings.Contains(text, want) {
			t.Errorf("errors %q lack %q", text, want)
		}
	}
	if len(errs) != 3 {
		t.Errorf("%d errors, want 3:\n%s", len(errs), text)
	}
}

// FuzzDecodeDesired feeds arbitrary files to the loader's parser and
// validation: they must never panic, and what passes must be valid.
func FuzzDecodeDesired(f *testing.F) {
	f.Add("d.yaml", "sysctls:\n  - name: net.ipv4.ip_forward\n    value: \"1\"\nroutes:\n  - prefix: 192.0.2.0/24\n    type: blackhole\n")
	f.Add("d.yaml", "rules:\n  - table: filter\n    chain: INPUT\n    name: ssh\n    spec: -p tcp --dport 22 -j ACCEPT\n")
	f.Add("d.json", `{"routes":[{"prefix":"2001:db8::/32","type":"blackhole"}]}`)
	f.Add("d.yaml", "routes: [{prefix: 10.0.0.0/8, via: 10.0.0.1}]")
	f.Fuzz(func(t *testing.T, path, data string) {
		df, err := decodeDesired(path, []byte(data))
		if err != nil {
			return
		}
		if _, err := validateDesired(path, df); err != nil {
			return
		}
		// What passes is what file mode takes, and it encodes for fleet
		// mode and decodes back as fleet mode's reflector does.
		items, err := decodeFileItems(path, []byte(data))
		if err != nil {
			t.Fatalf("a valid file is not taken: %v", err)
		}
		for _, it := range items {
			for _, k := range kinds {
				if k.tableName() != it.Table {
					continue
				}
				name, v, err := k.encode(it.Value.obj)
				if err != nil || name != it.Key {
					t.Fatalf("%s %s does not encode: %q, %v", it.Table, it.Key, name, err)
				}
				if err := k.decodes(it.Key, v); err != nil {
					t.Fatalf("%s %s = %s does not decode back: %v", it.Table, it.Key, v, err)
				}
			}
		}
	})
}

// The names validation returns are the kinds' names of the objects, in
// order: file mode's items are named by them.
func TestValidateNames(t *testing.T) {
	f, err := decodeDesired("desired.yaml", restartDesired(300, 50))
	if err != nil {
		t.Fatal(err)
	}
	names, err := validateDesired("desired.yaml", f)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, k := range kinds {
		objs, kn := f.of(k), names[k.fileKey()]
		if len(kn) != len(objs) {
			t.Fatalf("%s: %d names for %d objects", k.fileKey(), len(kn), len(objs))
		}
		for i, obj := range objs {
			if kn[i] != k.name(obj) {
				t.Errorf("%s[%d]: name %q, want %q", k.fileKey(), i, kn[i], k.name(obj))
			}
		}
		total += len(objs)
	}
	if total < 350 {
		t.Fatalf("%d objects decoded, want the file's 350 and its sysctls", total)
	}
}
