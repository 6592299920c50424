package sysctl

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name, value string
		wantErr     string // substring; "" means valid
	}{
		{"net.ipv4.ip_forward", "1", ""},
		{"net.ipv4.tcp_rmem", "4096\t87380 6291456", ""},
		{"net.ipv4.conf.veth-a_1.rp_filter", "2", ""},
		{"kernel.core_pattern", "|/usr/bin/x %p", ""},
		{"", "1", "field name"},
		{"net..ipv4", "1", "empty component"},
		{".net", "1", "empty component"},
		{"net.", "1", "empty component"},
		{"..", "1", "empty component"},
		{"net/ipv4/ip_forward", "1", `"/"`},
		{"net.ipv4.../../etc", "1", `"/"`},
		{"net.ipv4 ip_forward", "1", "not allowed"},
		{"net.ipv4.ip_forward\x00", "1", "not allowed"},
		{strings.Repeat("a", MaxNameLen+1), "1", "longer than"},
		{"net.ipv4.ip_forward", "", "field value"},
		{"net.ipv4.ip_forward", "  \t", "field value"},
		{"net.ipv4.ip_forward", "1\n0", "field value: control character"},
		{"net.ipv4.ip_forward", strings.Repeat("1", MaxValueLen+1), "field value: longer"},
	}
	for _, tt := range tests {
		err := (&Sysctl{Name: tt.name, Value: tt.value}).Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Validate(%q=%q) = %v, want nil", tt.name, tt.value, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("Validate(%q=%q) = nil, want error with %q", tt.name, tt.value, tt.wantErr)
		case err != nil && !strings.Contains(err.Error(), tt.wantErr):
			t.Errorf("Validate(%q=%q) = %v, want it to contain %q", tt.name, tt.value, err, tt.wantErr)
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Errorf("Validate(%q=%q) = %v, does not wrap ErrInvalid", tt.name, tt.value, err)
		}
	}
}

func TestMethods(t *testing.T) {
	a := &Sysctl{Name: "net.ipv4.tcp_rmem", Value: "4096\t87380", Status: reconciler.StatusDone()}
	b := a.Clone()
	if b == a || *b != *a {
		t.Fatalf("Clone = %+v, want an equal copy", b)
	}
	if got := b.SetStatus(reconciler.StatusPending()); got != b || b.GetStatus().Kind != reconciler.StatusKindPending {
		t.Fatalf("SetStatus did not set on the receiver and return it")
	}
	if a.Status.Kind != reconciler.StatusKindDone {
		t.Fatalf("SetStatus on the clone changed the original")
	}
	b.Value = "4096   87380 "
	if !a.Equal(b) {
		t.Errorf("Equal must ignore status and whitespace differences")
	}
	b.Value = "4096 87381"
	if a.Equal(b) {
		t.Errorf("Equal(%q, %q) = true", a.Value, b.Value)
	}
	if (*Sysctl)(nil).Equal(a) || !(*Sysctl)(nil).Equal(nil) {
		t.Errorf("Equal with nil is wrong")
	}
}

func TestJSON(t *testing.T) {
	out, err := json.Marshal(&Sysctl{Name: "net.ipv4.ip_forward", Value: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"name":"net.ipv4.ip_forward","value":"1"}` {
		t.Errorf("JSON = %s (a zero status must be omitted)", out)
	}
	var s Sysctl
	if err := json.Unmarshal([]byte(`{"name":"kernel.x","value":"2","status":{"Kind":"Done"}}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Name != "kernel.x" || s.Value != "2" || s.Status.Kind != reconciler.StatusKindDone {
		t.Errorf("decoded %+v", s)
	}
}

// FuzzValidate checks that no name that Validate accepts can reach a file
// outside the sysctl root, and that Validate never panics.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"net.ipv4.ip_forward", "..", "a/b", "a..b", ".a", "a.", "kernel.osrelease", "a.@:+-_"} {
		f.Add(s, "1")
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		obj := &Sysctl{Name: name, Value: value}
		err := obj.Validate()
		rel, perr := keyPath(name)
		if perr != nil {
			if err == nil {
				t.Fatalf("keyPath(%q) failed (%v) but Validate accepted it", name, perr)
			}
			return
		}
		root := "/proc/sys"
		p := filepath.Join(root, rel)
		if !strings.HasPrefix(p, root+"/") || filepath.Clean(p) != p {
			t.Fatalf("name %q maps to %q, outside %s or not clean", name, p, root)
		}
		if strings.ReplaceAll(rel, "/", ".") != name {
			t.Fatalf("name %q maps to %q, which does not map back", name, rel)
		}
	})
}
