package routes

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/reconciler"
)

func TestValidate(t *testing.T) {
	pfx := netip.MustParsePrefix
	addr := netip.MustParseAddr
	tests := []struct {
		name  string
		route Route
		want  string // substring of the error; "" for valid
	}{
		{"blackhole", Route{Prefix: pfx("10.0.0.0/8"), Type: TypeBlackhole}, ""},
		{"via", Route{Prefix: pfx("10.0.0.0/8"), Via: addr("192.0.2.1")}, ""},
		{"dev", Route{Prefix: pfx("10.0.0.0/8"), Dev: "lo"}, ""},
		{"via and dev, v6", Route{Prefix: pfx("2001:db8::/32"), Via: addr("fe80::1"), Dev: "eth0"}, ""},
		{"default route", Route{Prefix: pfx("0.0.0.0/0"), Via: addr("192.0.2.1")}, ""},
		{"big table and metric", Route{Prefix: pfx("10.0.0.0/8"), Dev: "lo", Table: 1<<32 - 1, Metric: 1<<32 - 1}, ""},
		{"unreachable", Route{Prefix: pfx("10.0.0.0/8"), Type: TypeUnreachable}, ""},
		{"prohibit", Route{Prefix: pfx("2001:db8::/32"), Type: TypeProhibit}, ""},

		{"no prefix", Route{Type: TypeBlackhole}, "prefix is missing"},
		{"host bits", Route{Prefix: pfx("10.1.2.3/8"), Type: TypeBlackhole}, "did you mean 10.0.0.0/8"},
		{"unicast without next hop", Route{Prefix: pfx("10.0.0.0/8")}, "needs via or dev"},
		{"unknown type", Route{Prefix: pfx("10.0.0.0/8"), Type: "local"}, `type "local" is unknown`},
		{"blackhole with via", Route{Prefix: pfx("10.0.0.0/8"), Type: TypeBlackhole, Via: addr("192.0.2.1")}, "not allowed with type"},
		{"blackhole with dev", Route{Prefix: pfx("10.0.0.0/8"), Type: TypeBlackhole, Dev: "lo"}, "not allowed with type"},
		{"family mismatch", Route{Prefix: pfx("10.0.0.0/8"), Via: addr("2001:db8::1")}, "address family"},
		{"unspecified via", Route{Prefix: pfx("10.0.0.0/8"), Via: addr("0.0.0.0")}, "unspecified"},
		{"zone", Route{Prefix: pfx("2001:db8::/32"), Via: addr("fe80::1%eth0")}, "zone"},
		{"link-local without dev", Route{Prefix: pfx("2001:db8::/32"), Via: addr("fe80::1")}, "needs dev"},
		{"long dev", Route{Prefix: pfx("10.0.0.0/8"), Dev: "abcdefghijklmnop"}, "longer than 15"},
		{"bad dev", Route{Prefix: pfx("10.0.0.0/8"), Dev: "eth0:1"}, "must not contain"},
		{"negative table", Route{Prefix: pfx("10.0.0.0/8"), Dev: "lo", Table: -1}, "table -1 is out of range"},
		{"huge table", Route{Prefix: pfx("10.0.0.0/8"), Dev: "lo", Table: 1 << 32}, "out of range"},
		{"local table", Route{Prefix: pfx("10.0.0.0/8"), Dev: "lo", Table: 255}, "belongs to the kernel"},
		{"negative metric", Route{Prefix: pfx("10.0.0.0/8"), Dev: "lo", Metric: -1}, "metric -1 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.route.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidRoute) {
				t.Fatalf("Validate error %v does not wrap ErrInvalidRoute", err)
			}
		})
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	r := Route{Prefix: netip.MustParsePrefix("10.1.2.3/8"), Type: "bogus", Metric: -5}
	err := r.Validate()
	for _, want := range []string{"host bits", "bogus", "metric -5"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to mention %q", err, want)
		}
	}
}

func TestKeyNormalizes(t *testing.T) {
	v4 := netip.MustParsePrefix("10.0.0.0/8")
	v6 := netip.MustParsePrefix("2001:db8::/32")
	tests := []struct {
		route Route
		want  RouteKey
	}{
		{Route{Prefix: v4}, RouteKey{254, v4, 0}},
		{Route{Prefix: v4, Table: 254, Metric: 7}, RouteKey{254, v4, 7}},
		{Route{Prefix: v4, Table: 100}, RouteKey{100, v4, 0}},
		{Route{Prefix: v6}, RouteKey{254, v6, 1024}},
		{Route{Prefix: v6, Metric: 1024}, RouteKey{254, v6, 1024}},
		{Route{Prefix: v6, Metric: 5, Table: 7}, RouteKey{7, v6, 5}},
	}
	for _, tt := range tests {
		if got := tt.route.Key(); got != tt.want {
			t.Errorf("(%s).Key() = %v, want %v", &tt.route, got, tt.want)
		}
	}
}

func TestCloneEqualStatus(t *testing.T) {
	r := &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Table: 5, Metric: 9}
	c := r.Clone()
	if c == r || !c.Equal(r) {
		t.Fatalf("Clone = %v, want an equal copy", c)
	}
	if got := c.SetStatus(reconciler.StatusDone()); got != c || c.GetStatus().Kind != reconciler.StatusKindDone {
		t.Fatalf("SetStatus did not set the status on the receiver")
	}
	if r.GetStatus().Kind != reconciler.StatusKindUnset {
		t.Fatal("SetStatus on the clone changed the original")
	}
	if !c.Equal(r) {
		t.Fatal("Equal must ignore the status")
	}
	for _, change := range []func(*Route){
		func(r *Route) { r.Prefix = netip.MustParsePrefix("10.0.0.0/9") },
		func(r *Route) { r.Via = netip.MustParseAddr("192.0.2.2") },
		func(r *Route) { r.Dev = "eth1" },
		func(r *Route) { r.Type = TypeBlackhole },
		func(r *Route) { r.Table = 6 },
		func(r *Route) { r.Metric = 10 },
	} {
		d := r.Clone()
		change(d)
		if d.Equal(r) {
			t.Errorf("Equal(%s, %s) = true", d, r)
		}
	}
	var nilRoute *Route
	if !nilRoute.Equal(nil) || nilRoute.Equal(r) || r.Equal(nil) || nilRoute.Clone() != nil {
		t.Error("nil routes: Equal and Clone misbehave")
	}
}

func TestString(t *testing.T) {
	r := &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Table: 5, Metric: 9}
	if got, want := r.String(), "10.0.0.0/8 via 192.0.2.1 dev eth0 table 5 metric 9"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	r = &Route{Prefix: netip.MustParsePrefix("2001:db8::/32"), Type: TypeBlackhole}
	if got, want := r.String(), "blackhole 2001:db8::/32"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// TestEncoding checks that routes read from and write to JSON and YAML in
// the text forms a person writes: "10.0.0.0/8", not byte arrays.
func TestEncoding(t *testing.T) {
	full := &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("192.0.2.1"), Dev: "eth0", Table: 5, Metric: 9}
	bare := &Route{Prefix: netip.MustParsePrefix("2001:db8::/32"), Type: TypeBlackhole}

	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"prefix":"10.0.0.0/8"`, `"via":"192.0.2.1"`, `"dev":"eth0"`, `"table":5`, `"metric":9`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	b, err = json.Marshal(bare)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "via") || strings.Contains(string(b), "table") {
		t.Errorf("JSON %s has fields that are not set", b)
	}

	for _, r := range []*Route{full, bare} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Route
		if err := json.Unmarshal(b, &back); err != nil || !back.Equal(r) {
			t.Errorf("JSON round trip of %s: got %s, %v", r, &back, err)
		}
		y, err := yaml.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back = Route{}
		if err := yaml.Unmarshal(y, &back); err != nil || !back.Equal(r) {
			t.Errorf("YAML round trip of %s: got %s, %v\n%s", r, &back, err, y)
		}
	}

	var fromFile Route
	src := "prefix: 10.1.0.0/16\nvia: 192.0.2.1\nmetric: 100\n"
	if err := yaml.Unmarshal([]byte(src), &fromFile); err != nil {
		t.Fatal(err)
	}
	want := Route{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Via: netip.MustParseAddr("192.0.2.1"), Metric: 100}
	if !fromFile.Equal(&want) {
		t.Errorf("YAML %q read as %s, want %s", src, &fromFile, &want)
	}
}
