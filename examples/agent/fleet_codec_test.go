package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/reconciler"
)

// The sample file's objects go to etcd and come back equal, under names
// without '/', one per primary key.
func TestFleetCodecRoundTrip(t *testing.T) {
	data, err := os.ReadFile("desired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeDesired("desired.yaml", data)
	if err == nil {
		_, err = validateDesired("desired.yaml", f)
	}
	if err != nil {
		t.Fatal(err)
	}
	objs, err := desiredObjects(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs[sysctl.TableName]) != 3 || len(objs[routes.TableName]) != 4 || len(objs[iptables.TableName]) != 4 {
		t.Fatalf("objects by table: %d, %d, %d; want 3, 4, 4", len(objs[sysctl.TableName]), len(objs[routes.TableName]), len(objs[iptables.TableName]))
	}
	for table, byName := range objs {
		for name, v := range byName {
			if strings.Contains(name, "/") || strings.Contains(string(v), `"status"`) {
				t.Errorf("%s %q = %s: a name with '/' or a value with status", table, name, v)
			}
		}
	}
	for _, o := range f.of(kinds[1]) {
		r := o.(*routes.Route)
		got, err := decodeObject[routes.Route](routeKey)(fleetName(routeKey(r)), objs[routes.TableName][fleetName(routeKey(r))])
		if err != nil || !got.Equal(r) {
			t.Errorf("route %s: back %v, %v", r, got, err)
		}
	}
	for _, o := range f.of(kinds[0]) {
		s := o.(*sysctl.Sysctl)
		got, err := decodeObject[sysctl.Sysctl](sysctlKey)(fleetName(s.Name), objs[sysctl.TableName][fleetName(s.Name)])
		if err != nil || !got.Equal(s) {
			t.Errorf("sysctl %s: back %v, %v", s, got, err)
		}
	}
	for _, o := range f.of(kinds[2]) {
		r := o.(*iptables.Rule)
		got, err := decodeObject[iptables.Rule](ruleKey)(fleetName(r.Key()), objs[iptables.TableName][fleetName(r.Key())])
		if err != nil || !got.Equal(r) {
			t.Errorf("rule %s: back %v, %v", r, got, err)
		}
	}
	// Encoding is deterministic: an unchanged object is an unchanged value
	// (etcd.Apply then writes nothing).
	again, _ := desiredObjects(f)
	for table, byName := range objs {
		for name, v := range byName {
			if string(again[table][name]) != string(v) {
				t.Errorf("%s %s encoded twice differs: %s, %s", table, name, v, again[table][name])
			}
		}
	}
}

// A value the agent cannot use is an error that says why: the reflector
// reports it and keeps the last good version.
func TestFleetDecodeRejects(t *testing.T) {
	dec := decodeObject[routes.Route](routeKey)
	name := fleetName("254/192.0.2.0/24/0")
	for _, c := range []struct {
		name, value, want string
	}{
		{name, `{"prefix":"192.0.2.0/24","type":"blackhole"}`, ""},
		{name, `{"prefix":"192.0.2.0/24","type":"blackhole","typo":1}`, `unknown field "typo"`},
		{name, `{"prefix":"192.0.2.1/24","type":"blackhole"}`, "host bits set"},
		{name, `{"prefix":"192.0.2.0/24","type":"warp"}`, `type "warp" is unknown`},
		{name, `not json`, "decoding"},
		{fleetName("254/198.51.100.0/24/0"), `{"prefix":"192.0.2.0/24","type":"blackhole"}`, "but the object's name is"},
	} {
		_, err := dec(c.name, []byte(c.value))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one with %q", c.value, err, c.want)
		}
	}
}

// fleetName is a bijection onto names without '/'.
func FuzzFleetName(f *testing.F) {
	for _, s := range []string{"net.ipv4.ip_forward", "254/10.0.0.0/8/0", "filter/INPUT/allow-ssh", "%2F", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		name := fleetName(key)
		if strings.Contains(name, "/") {
			t.Fatalf("fleetName(%q) = %q has '/'", key, name)
		}
		back, err := url.PathUnescape(name)
		if err != nil || back != key {
			t.Fatalf("fleetName(%q) = %q reads back as %q, %v", key, name, back, err)
		}
	})
}

// Whatever etcd holds, decoding a route either fails or yields a valid
// route stored under its own name, whose value decodes to it again.
func FuzzFleetDecodeRoute(f *testing.F) {
	f.Add("254%2F192.0.2.0%2F24%2F0", []byte(`{"prefix":"192.0.2.0/24","type":"blackhole"}`))
	f.Add("x", []byte(`{"prefix":"10.0.0.0/8","dev":"lo","metric":5,"table":7}`))
	dec := decodeObject[routes.Route](routeKey)
	f.Fuzz(func(t *testing.T, name string, v []byte) {
		r, err := dec(name, v)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil || fleetName(routeKey(r)) != name {
			t.Fatalf("decoded %v (%v) under %q", r, err, name)
		}
		enc, err := encodeObject(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := dec(name, enc)
		if err != nil || !back.Equal(r) {
			t.Fatalf("re-encoded %s decodes to %v, %v", enc, back, err)
		}
	})
}

// encodeObject writes, byte for byte, what decoding an object's JSON into
// a map of its members, deleting status and encoding the map writes
// (encodeObjectViaMap, the model), for objects of each kind with any
// strings and a status.
func FuzzEncodeObject(f *testing.F) {
	f.Add("filter", "INPUT", "allow-ssh", `-p tcp --dport 22 -m comment --comment "a <b> & \"c\"" -j ACCEPT`, 7, "net.ipv4.ip_forward", "1", "lo", "boom")
	f.Add("", "", "", "", 0, "", "", "", "")
	f.Add("nat", "POSTROUTING", "ü\x00\xff", "\\\"\u2028", -3, "a.b", " 2 ", "v0", "")
	f.Fuzz(func(t *testing.T, table, chain, name, spec string, prio int, key, value, dev, errMsg string) {
		st := reconciler.Status{Kind: reconciler.StatusKindError, Error: errMsg, UpdatedAt: time.Unix(int64(prio), 0)}
		objs := []any{
			&iptables.Rule{Table: table, Chain: chain, Name: name, Priority: prio, Spec: spec, Status: st},
			&sysctl.Sysctl{Name: key, Value: value, Status: st},
			&routes.Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Dev: dev, Type: name, Table: prio, Metric: -prio, Status: st},
			&routes.Route{},
		}
		for _, obj := range objs {
			got, err := encodeObject(obj)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			want, err := encodeObjectViaMap(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encodeObject(%+v) =\n%s\nwant\n%s", obj, got, want)
			}
		}
	})
}
