package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The model: a fake fleet whose nodes answer as scripted (ACK, NACK,
// silence, death, each after a delay), kept by a fake store with etcd's
// guards (the driver's lease, the state's version), in which the driver
// can crash before or after any of its writes and be resumed by another.
// The expected outcome is computed from the script alone.

// behaviour is how a model node answers its switch.
type behaviour string

const (
	ack    behaviour = "ack"
	nack   behaviour = "nack"
	silent behaviour = "silent" // stays at its old state's status
	die    behaviour = "die"    // its status goes (not live)
	flaky  behaviour = "flaky"  // NACKs, then ACKs 2s later (a retry succeeded): counted as failed
)

type modelNode struct {
	behaviour behaviour
	delay     time.Duration
	live      bool
	status    NodeStatus
	pinRev    int64 // 0: not pinned
	newState  bool  // holds the new state now
	everNew   bool
}

// modelFleet is the fake etcd: the rollout's keys, the pins, the nodes.
type modelFleet struct {
	t  *testing.T
	mu sync.Mutex
	// rev is the store's revision: every change moves it.
	rev        int64
	active     []byte // the rollout's JSON; nil when none
	activeRev  int64
	driver     int // the lease holding the rollout; 0: paused
	leases     int
	currentRev int64 // the fleet-wide current key's ModRevision
	completed  bool  // the current key names the new generation
	history    []*Rollout
	nodes      map[string]*modelNode
	changed    chan struct{}
	// Crash injection: the write numbered crashAt fails, before its
	// effect or (crashAfter) after it.
	writes, crashAt int
	crashAfter      bool
}

var errCrash = errors.New("driver crashed (model)")

func newModelFleet(t *testing.T, script map[string]behaviour, delays map[string]time.Duration) *modelFleet {
	f := &modelFleet{t: t, rev: 1, currentRev: 1, nodes: map[string]*modelNode{}, changed: make(chan struct{})}
	for name, b := range script {
		f.nodes[name] = &modelNode{behaviour: b, delay: delays[name], live: true,
			status: NodeStatus{Node: name, Revision: 1, Objects: map[string]int{Done: 1}}}
	}
	return f
}

// bumpLocked moves the revision and wakes the waiters.
func (f *modelFleet) bumpLocked() int64 {
	f.rev++
	close(f.changed)
	f.changed = make(chan struct{})
	return f.rev
}

// later runs fn under the lock after d (fake time).
func (f *modelFleet) later(d time.Duration, fn func()) {
	time.AfterFunc(d, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		fn()
		f.bumpLocked()
	})
}

// pinLocked switches node to the new state, as its agent would: the
// answer comes after its delay.
func (f *modelFleet) pinLocked(name string, rev int64) {
	n := f.nodes[name]
	n.pinRev, n.newState, n.everNew = rev, true, true
	switch n.behaviour {
	case ack:
		f.later(n.delay, func() {
			if n.pinRev == rev && n.live {
				n.status = NodeStatus{Node: name, Revision: rev, Objects: map[string]int{Done: 1}}
			}
		})
	case nack:
		f.later(n.delay, func() {
			if n.pinRev == rev && n.live {
				n.status = NodeStatus{Node: name, Revision: rev, Objects: map[string]int{Done: 1, "Error": 1}, Errors: []string{"objs x: refused"}}
			}
		})
	case flaky:
		f.later(n.delay, func() {
			if n.pinRev == rev && n.live {
				n.status = NodeStatus{Node: name, Revision: rev, Objects: map[string]int{Done: 1, "Error": 1}, Errors: []string{"objs x: refused once"}}
			}
		})
		f.later(n.delay+2*time.Second, func() {
			if n.pinRev == rev && n.live {
				n.status = NodeStatus{Node: name, Revision: rev, Objects: map[string]int{Done: 2}}
			}
		})
	case die:
		f.later(n.delay, func() { n.live = false })
	}
}

// modelStore is one driver's (or an abort's) handle of the fake store.
type modelStore struct {
	f       *modelFleet
	lease   int
	version int64
}

// writeLocked checks the guards and counts the write for crash
// injection: it returns whether to apply the write and the error to
// return after it.
func (s *modelStore) writeLocked(r *Rollout) (apply bool, err error) {
	f := s.f
	if f.active == nil || f.activeRev != s.version || (s.lease != 0 && f.driver != s.lease) {
		return false, fmt.Errorf("%w (model)", ErrRolloutLost)
	}
	f.writes++
	if f.writes == f.crashAt {
		return f.crashAfter, errCrash
	}
	// The state written never has the new state beyond its reached
	// cohorts.
	if r.Result == "" && (r.Switched > r.Sizes[r.Step] || (r.Step > 0 && r.Switched < r.Sizes[r.Step-1])) {
		f.t.Errorf("state written with %d switched at step %d (sizes %v)", r.Switched, r.Step, r.Sizes)
	}
	return true, nil
}

func (s *modelStore) putLocked(r *Rollout) {
	b, err := json.Marshal(r)
	if err != nil {
		s.f.t.Fatal(err)
	}
	s.f.active = b
	s.f.activeRev = s.f.bumpLocked()
	s.version = s.f.activeRev
}

func (s *modelStore) pinBatch(*Rollout) int { return 2 }

func (s *modelStore) switchNodes(_ context.Context, r *Rollout, nodes []string) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	apply, err := s.writeLocked(r)
	if apply {
		s.putLocked(r)
		for _, n := range nodes {
			s.f.pinLocked(n, s.f.rev)
		}
	}
	return err
}

func (s *modelStore) save(_ context.Context, r *Rollout) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	apply, err := s.writeLocked(r)
	if apply {
		s.putLocked(r)
	}
	return err
}

func (s *modelStore) observe(_ context.Context, r *Rollout, nodes []string, claimed bool) (map[string]nodeObs, int64, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if claimed && (f.active == nil || f.activeRev != s.version || f.driver != s.lease) {
		return nil, 0, fmt.Errorf("%w (model)", ErrRolloutLost)
	}
	out := map[string]nodeObs{}
	for _, name := range nodes {
		n := f.nodes[name]
		o := nodeObs{live: n.live, desired: max(f.currentRev, n.pinRev)}
		if n.live {
			o.status = n.status
		}
		out[name] = o
	}
	return out, f.rev, nil
}

func (s *modelStore) wait(ctx context.Context, after int64) error {
	s.f.mu.Lock()
	rev, ch := s.f.rev, s.f.changed
	s.f.mu.Unlock()
	if rev > after {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *modelStore) finish(_ context.Context, r *Rollout) (int64, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	apply, err := s.writeLocked(r)
	if !apply {
		return 0, err
	}
	rev := f.bumpLocked()
	f.currentRev, f.completed = rev, r.Result == RolloutCompleted
	for name, n := range f.nodes {
		pinned := n.pinRev != 0
		n.pinRev = 0
		switch {
		case f.completed:
			n.newState, n.everNew = true, true
			if n.live && n.behaviour != silent {
				f.later(time.Millisecond, func() { n.status = NodeStatus{Node: name, Revision: rev, Objects: map[string]int{Done: 1}} })
			}
		case pinned:
			// Back to the previous state; a live node applies it.
			n.newState = false
			if n.live {
				f.later(5*time.Millisecond, func() {
					if n.live {
						n.status = NodeStatus{Node: name, Revision: rev, Objects: map[string]int{Done: 1}}
					}
				})
			}
		}
	}
	c := r.clone()
	c.Revision = rev
	f.history = append(f.history, c)
	f.active, f.driver = nil, 0
	return rev, err
}

func (s *modelStore) release(context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.driver == s.lease {
		s.f.driver = 0
	}
	return nil
}

// claim starts (r given) or resumes (r nil: the stored state, parsed as
// ResumeRollout does) a driver with a new lease.
func (f *modelFleet) claim(r *Rollout) (*RolloutDriver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == nil {
		if f.active == nil {
			return nil, ErrNoRollout
		}
		if f.driver != 0 {
			return nil, ErrRolloutDriven
		}
		var err error
		if r, err = parseRollout("model/active", f.active); err != nil {
			f.t.Fatal(err)
		}
	}
	f.leases++
	f.driver = f.leases
	s := &modelStore{f: f, lease: f.leases}
	s.putLocked(r)
	return &RolloutDriver{store: s, r: r}, nil
}

// expect is the outcome the script makes: the step that halts (-1:
// completed) and why ("failed", "not acknowledged").
func expect(order []string, sizes []int, maxFailed int, script map[string]behaviour) (int, string) {
	for k, size := range sizes {
		nacks, quiet := 0, false
		for _, n := range order[:size] {
			switch script[n] {
			case nack, flaky:
				nacks++
			case silent, die:
				quiet = true
			}
		}
		if nacks > maxFailed {
			return k, "failed"
		}
		if quiet {
			return k, "not acknowledged"
		}
	}
	return -1, ""
}

// modelCase is one script.
type modelCase struct {
	names     []string
	script    map[string]behaviour
	delays    map[string]time.Duration
	steps     []StepSize
	maxFailed FailureLimit
	pause     time.Duration
}

func randomCase(rng *rand.Rand) modelCase {
	c := modelCase{script: map[string]behaviour{}, delays: map[string]time.Duration{}}
	for i := range 2 + rng.IntN(6) {
		name := fmt.Sprintf("n%d", i)
		c.names = append(c.names, name)
		c.script[name] = []behaviour{ack, ack, ack, ack, ack, ack, nack, flaky, silent, die}[rng.IntN(10)]
		c.delays[name] = time.Duration(1+rng.IntN(3000)) * time.Millisecond
	}
	stepSets := [][]StepSize{{{Percent: 100}}, {{Count: 1}, {Percent: 100}}, {{Count: 1}, {Percent: 50}, {Percent: 100}},
		{{Count: 1}, {Percent: 10}, {Percent: 100}}, {{Percent: 30}, {Percent: 60}, {Percent: 100}}}
	c.steps = stepSets[rng.IntN(len(stepSets))]
	if c.steps[0].Count > len(c.names) {
		c.steps = c.steps[1:]
	}
	c.maxFailed = []FailureLimit{{}, {}, {Count: 1}, {Count: 2}, {Percent: 50}}[rng.IntN(5)]
	c.pause = []time.Duration{0, 0, time.Second}[rng.IntN(3)]
	return c
}

// run drives c with a crash at write crashAt (0: none), resuming after
// each crash, and checks the outcome and the invariants. It returns how
// many writes the run made.
func (c modelCase) run(t *testing.T, crashAt int, crashAfter bool) int {
	var writes int
	synctest.Test(t, func(t *testing.T) {
		f := newModelFleet(t, c.script, c.delays)
		f.crashAt, f.crashAfter = crashAt, crashAfter
		order, err := rolloutOrder(c.names, nil)
		if err != nil {
			t.Fatal(err)
		}
		sizes, err := rolloutSizes(c.steps, len(order))
		if err != nil {
			t.Fatal(err)
		}
		var stepText []string
		for _, st := range c.steps {
			stepText = append(stepText, st.String())
		}
		r := &Rollout{ID: "r000000000001", Started: time.Now(), Steps: stepText, Sizes: sizes, Nodes: order,
			MaxFailures: c.maxFailed.String(), MaxFailed: c.maxFailed.Nodes(len(order)), StepTimeout: 5 * time.Second,
			StepPause: c.pause, Tables: []RolloutTable{{Table: "objs", Old: "g000000000001", New: "g000000000002"}}, Named: []string{"objs"}}
		d, err := f.claim(r)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for crashes := 0; ; crashes++ {
			_, err := d.Run(ctx, nil)
			if !errors.Is(err, errCrash) {
				if err != nil && !errors.Is(err, ErrRolloutHalted) {
					t.Fatalf("run: %v", err)
				}
				break
			}
			// The crashed driver's lease expires; another resumes.
			old := d
			f.mu.Lock()
			f.driver = 0
			f.mu.Unlock()
			if d, err = f.claim(nil); errors.Is(err, ErrNoRollout) {
				break // it crashed after finishing
			} else if err != nil {
				t.Fatal(err)
			}
			if !old.Done() {
				if _, err := old.Step(ctx); !errors.Is(err, ErrRolloutLost) {
					t.Fatalf("the crashed driver, after a resume: %v", err)
				}
			}
			if crashes > 3 {
				t.Fatal("crashes without end")
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		writes = f.writes
		c.check(t, f, order, sizes, r.MaxFailed)
	})
	return writes
}

// check compares the finished fleet with the script's outcome.
func (c modelCase) check(t *testing.T, f *modelFleet, order []string, sizes []int, maxFailed int) {
	if f.active != nil || len(f.history) != 1 {
		t.Fatalf("after the run: active %s, %d in the history", f.active, len(f.history))
	}
	h := f.history[0]
	halt, why := expect(order, sizes, maxFailed, c.script)
	if halt < 0 {
		if h.Result != RolloutCompleted || len(h.Passed) != len(sizes) {
			t.Fatalf("result %q (%s) after %d steps; want completed", h.Result, h.Reason, len(h.Passed))
		}
		for name, n := range f.nodes {
			if !n.newState {
				t.Errorf("completed, yet node %s lacks the new state", name)
			}
		}
		return
	}
	wantReason := fmt.Sprintf("step %d of %d", halt+1, len(sizes))
	if h.Result != RolloutRolledBack || !strings.HasPrefix(h.Reason, wantReason) || !strings.Contains(h.Reason, why) || len(h.Passed) != halt {
		t.Fatalf("result %q (%s) after %d steps; want halted at %s, %s", h.Result, h.Reason, len(h.Passed), wantReason, why)
	}
	reached := order[:sizes[halt]]
	for name, n := range f.nodes {
		if n.newState || n.pinRev != 0 {
			t.Errorf("rolled back, yet node %s holds the new state", name)
		}
		if n.everNew && !slices.Contains(reached, name) {
			t.Errorf("node %s, never reached, had the new state", name)
		}
	}
	for _, a := range h.Failing {
		if a.Answer == AnswerACK || !slices.Contains(reached, a.Node) {
			t.Errorf("failing %+v", a)
		}
	}
	for _, name := range reached {
		b := c.script[name]
		failing := slices.ContainsFunc(h.Failing, func(a NodeAnswer) bool { return a.Node == name })
		if (why == "failed" && (b == nack || b == flaky) && !failing) || (why == "not acknowledged" && (b == silent || b == die) && !failing) {
			t.Errorf("node %s (%s) not named failing: %+v", name, b, h.Failing)
		}
	}
}

// The rollout's state machine against the model, for random scripts:
// without a crash, and with the driver crashing before and after each of
// its writes in turn (resumed by another, the crashed one refused), the
// outcome is the script's, no node outside the reached cohorts ever has
// the new state, a completed rollout leaves every node on it and a
// halted one none.
func TestRolloutModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 2026))
	cases := 40
	if testing.Short() {
		cases = 10
	}
	for i := range cases {
		c := randomCase(rng)
		t.Run(fmt.Sprintf("case%02d", i), func(t *testing.T) {
			n := c.run(t, 0, false)
			for at := 1; at <= n; at++ {
				for _, after := range []bool{false, true} {
					if t.Failed() {
						return
					}
					t.Run(fmt.Sprintf("crash%d-after=%v", at, after), func(t *testing.T) { c.run(t, at, after) })
				}
			}
		})
	}
}
