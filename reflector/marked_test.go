package reflector_test

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// markedSource is a stepSource that marks the end of its revisions.
type markedSource struct{ *stepSource }

func (markedSource) MarksRevisions() bool { return true }

// A source slowed down within a revision, for longer than BatchInterval
// (its process starved of CPU): if it marks its revisions, the part sent
// is never committed as whole, nor claimed; the rest and the Progress
// make the revision whole. A source that does not mark them has the part
// committed after BatchInterval of quiet (the documented rule), and the
// rest, late, makes the reflector list again.
func TestSlowSourceWithinARevision(t *testing.T) {
	for _, marked := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			step := newStepSource(10, reflector.Item[int]{Key: "x", Value: 1})
			var src reflector.Source[int] = step
			if marked {
				src = markedSource{step}
			}
			f := startStep(t, src, 1000, 10*time.Millisecond, nil)
			w := <-step.watches
			w <- putEv("a", 2, 11) // half of revision 11
			time.Sleep(time.Second)
			synctest.Wait()
			got, _ := f.contents()
			if marked {
				if !maps.Equal(got, map[string]int{"x": 1}) || f.reflector.Revision() != 10 {
					t.Fatalf("a marked source paused within revision 11: table %v at Revision %d, want revision 10's", got, f.reflector.Revision())
				}
				w <- putEv("b", 3, 11)
				w <- progressEv(11)
				synctest.Wait()
				if got, _ := f.contents(); !maps.Equal(got, map[string]int{"x": 1, "a": 2, "b": 3}) || f.reflector.Revision() != 11 {
					t.Fatalf("after the rest of revision 11: table %v at Revision %d", got, f.reflector.Revision())
				}
				close(w)
				<-step.watches
				return
			}
			if !maps.Equal(got, map[string]int{"x": 1, "a": 2}) {
				t.Fatalf("an unmarked source paused within revision 11: table %v, want its part taken as whole", got)
			}
			step.set(11, reflector.Item[int]{Key: "x", Value: 1}, reflector.Item[int]{Key: "a", Value: 2}, reflector.Item[int]{Key: "b", Value: 3})
			w <- putEv("b", 3, 11) // late: the reflector lists again
			w2 := <-step.watches
			synctest.Wait()
			if got, _ := f.contents(); !maps.Equal(got, map[string]int{"x": 1, "a": 2, "b": 3}) || f.reflector.Revision() != 11 {
				t.Fatalf("after the late event and the relist: table %v at Revision %d", got, f.reflector.Revision())
			}
			close(w2)
			<-step.watches
		})
	}
}
