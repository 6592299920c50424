package fleetcmd

import (
	"net/url"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// `fleet status --objects` names every object not Done as its key reads:
// the etcd name unescaped, or, when the name does not unescape (garbage
// under PREFIX/objects, written by another tool), the name as it is; an
// object line never loses its name.
func TestFleetStatusObjectsNamesGarbage(t *testing.T) {
	f := newFleetFixture(t, etcdtest.StartCluster(t, etcdtest.Binary(t), 1))
	f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Done": 2, "Error": 2}})
	for name, v := range map[string]string{
		url.PathEscape("254/10.0.0.0/8/0"): `{"kind":"Error","error":"boom"}`,
		"%zz":                              `{"kind":"Error","error":"bang"}`,
	} {
		if _, err := f.c.Put(t.Context(), f.l.ObjectStatus("n1", "routes", name), v); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := f.run("status", "--objects")
	if code != 0 {
		t.Fatalf("fleet status --objects: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"n1: routes 254/10.0.0.0/8/0: Error boom", "n1: routes %zz: Error bang"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
