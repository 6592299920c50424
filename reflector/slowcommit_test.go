package reflector_test

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// A commit that takes longer than BatchInterval (a slow Transform here; a
// large batch on a loaded machine alike) while the source is blocked
// handing over the rest of a revision: the source did not pause, the
// reflector did. The revision must still be committed whole and claimed
// only then; none of its events may be dropped.
//
// Each round: revision R holds a slow value, R+1 two puts (x, y) and a
// Progress. x makes R whole and its commit runs (2s of fake time, the
// interval is 1s) while the source waits to send y. When the commit ends,
// both the timer (x's revision "quiet" for 1s) and y are ready; if the
// timer wins, R+1 is taken as whole with x alone, Revision claims it, and
// y (at a revision now "complete") is dropped as stale. Twenty rounds make
// a miss by chance unlikely (2^-20).
func TestSlowCommitKeepsARevisionWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &chanSource{rev: 10, events: make(chan reflector.Event[int])}
		f := startStep(t, src, 1, time.Second, func(key string, v int) (*obj, error) {
			if v >= 1000 {
				time.Sleep(2 * time.Second) // a slow value: its commit takes twice BatchInterval
			}
			return &obj{Name: key, Value: v}, nil
		})
		synctest.Wait()
		for i := range 20 {
			rev := uint64(11 + 2*i)
			src.events <- putEv("slow", 1000+i, rev)
			src.events <- putEv("x", i, rev+1)
			src.events <- putEv("y", i, rev+1)
			src.events <- progressEv(rev + 1)
			synctest.Wait()
			want := map[string]int{"slow": 1000 + i, "x": i, "y": i}
			if got, _ := f.contents(); !maps.Equal(got, want) || f.reflector.Revision() != rev+1 {
				t.Fatalf("round %d: the table holds %v at Revision %d; want %v at %d (revision %d split: y dropped)",
					i, got, f.reflector.Revision(), want, rev+1, rev+1)
			}
		}
	})
}
