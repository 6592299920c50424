package reconciler

import (
	"fmt"
	"slices"

	"github.com/steadystate/steadystate/internal/shrink"
)

// roundLogLimit is how many objects one round logs one by one for each
// kind of line: recoveries ("Done after N failures: OBJ") and repairs
// ("Drift repaired"). The rest are counted into one line when the round
// ends ("Done after failures: N more objects"), so that 50,000 routes
// back after their link came up log ten lines and a count, not 50,000.
// Every repair is still counted in the metrics, kept in the repair log and
// handed to Config.OnRepair.
const roundLogLimit = 10

// roundLog counts the lines of each kind a round asked for.
type roundLog struct {
	recovered, repaired int
}

// recovery reports whether the round may log one more recovery.
func (l *roundLog) recovery() bool {
	l.recovered++
	return l.recovered <= roundLogLimit
}

// repair reports whether the round may log one more repair.
func (l *roundLog) repair() bool {
	l.repaired++
	return l.repaired <= roundLogLimit
}

// endRound logs what the round did not log one by one, and starts the
// next round's count.
func (r *reconciler[Obj]) endRound() {
	l := &r.roundLog
	if n := l.recovered - roundLogLimit; n > 0 {
		r.cfg.Logger.Info(fmt.Sprintf("Done after failures: %d more %s (the first %d logged one by one)", n, objectsWord(n), roundLogLimit), "objects", l.recovered)
	}
	if n := l.repaired - roundLogLimit; n > 0 {
		r.cfg.Logger.Info(fmt.Sprintf("Drift repaired: %d more %s (the first %d logged one by one)", n, objectsWord(n), roundLogLimit), "objects", l.repaired)
	}
	*l = roundLog{}
	r.terminal = shrink.Map(r.terminal, &r.peaks.terminal)
	r.failures = shrink.Map(r.failures, &r.peaks.failures)
	r.retries.byKey = shrink.Map(r.retries.byKey, &r.peaks.retries)
	if h := r.retries.heap; cap(h) > shrink.Above && len(h) < cap(h)/4 {
		r.retries.heap = slices.Clone(h) // a new array: a clipped slice would hold the old one
	}
}

func objectsWord(n int) string {
	if n == 1 {
		return "object"
	}
	return "objects"
}
