package reflector_test

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// A source whose revision went back (an etcd cluster restored from a
// snapshot taken at an earlier revision: etcdutl snapshot restore without
// --bump-revision): the relist at 5 is what the tables hold, so Revision
// must say 5, not keep the 10 reached before. Otherwise a change the
// restored source then makes at revision 8 is claimed (Revision 10 >= 8)
// before it was received: a node reports "applied" early.
func TestRelistAtAnEarlierRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newStepSource(10, reflector.Item[int]{Key: "x", Value: 1}, reflector.Item[int]{Key: "gone", Value: 9})
		f := startStep(t, src, 1000, time.Second, nil)
		w := <-src.watches
		synctest.Wait()
		if f.reflector.Revision() != 10 {
			t.Fatalf("after the list: Revision %d", f.reflector.Revision())
		}
		// Restored: revision 5, where "gone" did not exist yet.
		src.set(5, reflector.Item[int]{Key: "x", Value: 1})
		close(w)
		w = <-src.watches
		synctest.Wait()
		got, _ := f.contents()
		if !maps.Equal(got, map[string]int{"x": 1}) {
			t.Fatalf("after the relist at 5: table %v", got)
		}
		if rev := f.reflector.Revision(); rev > 5 {
			t.Errorf("after a relist at revision 5 the tables hold the source's state at 5, but Revision says %d: "+
				"the change the source makes next, at 8, is claimed before it is received", rev)
		}
		w <- putEv("b", 2, 8)
		w <- progressEv(8)
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"x": 1, "b": 2}) || f.reflector.Revision() != 8 {
			t.Errorf("after the change at 8: table %v at Revision %d, want b at 8", got, f.reflector.Revision())
		}
		close(w)
		<-src.watches
	})
}
