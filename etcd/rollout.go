package etcd

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The results of a finished rollout (Rollout.Result).
const (
	// RolloutCompleted: every step passed; the new state is in force
	// fleet-wide.
	RolloutCompleted = "completed"
	// RolloutRolledBack: a step failed (Rollout.Reason says how) or the
	// rollout was aborted; every node is back at the previous state.
	RolloutRolledBack = "halted, rolled back"
)

// The answers of a node to a step (NodeAnswer.Answer).
const (
	// AnswerACK: the node applied its desired state at or past its
	// switch (NodeStatus.Applied).
	AnswerACK = "ACK"
	// AnswerNACK: the node received that state and reports objects in
	// Error, Rejected or DeleteFailing (NodeStatus.Failed).
	AnswerNACK = "NACK"
	// AnswerNone: no answer yet: the node has not received the state,
	// is still applying it, or is not live (lost, stopped).
	AnswerNone = "none"
)

// The states of a rollout under way (RolloutState.State).
const (
	// RolloutRunning: a driver holds the rollout's lease.
	RolloutRunning = "running"
	// RolloutPaused: no driver holds it (the driver stopped or died and
	// its lease expired); ResumeRollout continues it, AbortRollout rolls
	// it back.
	RolloutPaused = "paused"
)

// RolloutHistoryKept is how many finished rollouts the history keeps: the
// transaction that finishes one deletes the oldest beyond it.
const RolloutHistoryKept = 20

// DefaultStepTimeout is RolloutSpec.StepTimeout's default: how long a step
// waits for every node of its cohort to answer.
const DefaultStepTimeout = 2 * time.Minute

// RolloutLeaseTTL is the lease of a rollout's driver: a driver that dies
// leaves the rollout paused at most this long after its last keep-alive.
const RolloutLeaseTTL = 10 * time.Second

var (
	// ErrRolloutActive is wrapped by the error of ApplyTables and
	// StartRollout while a rollout is under way or paused; the error names
	// it.
	ErrRolloutActive = errors.New("a rollout is under way")
	// ErrNoRollout is wrapped by the error of ResumeRollout and
	// AbortRollout when no rollout is under way.
	ErrNoRollout = errors.New("no rollout under way")
	// ErrRolloutDriven is wrapped by ResumeRollout's error when a live
	// driver holds the rollout (it is not paused); the error names it.
	ErrRolloutDriven = errors.New("the rollout has a live driver")
	// ErrRolloutLost is wrapped by a driver's error when it no longer
	// drives the rollout: it was aborted, or the driver's lease expired
	// (the rollout was paused, and maybe resumed by another driver). The
	// driver wrote nothing since.
	ErrRolloutLost = errors.New("this driver no longer drives the rollout")
	// ErrRolloutHalted is wrapped by RolloutDriver.Run's error when a step
	// failed: the rollout was rolled back (Rollout.Reason says why).
	ErrRolloutHalted = errors.New("the rollout halted and was rolled back")
	// ErrRolloutUnreadable is wrapped by the error of RolloutStatus and
	// ResumeRollout when the rollout's state in etcd does not parse; the
	// error names the key. Nothing is applied from it.
	ErrRolloutUnreadable = errors.New("the rollout's state in etcd does not parse")
	// ErrNothingToRollOut is wrapped by StartRollout's error when the new
	// state equals the one in force: nothing was written.
	ErrNothingToRollOut = errors.New("the desired state is already in force: nothing to roll out")
)

// Rollout is a rollout's state, kept as JSON under Layout.RolloutActive
// while it runs and under Layout.RolloutHistory once it finished. Only
// its driver writes it (and AbortRollout).
type Rollout struct {
	ID     string `json:"id"`               // "r000000000007": the rollouts of a prefix in order
	Source string `json:"source,omitempty"` // what was rolled out (a file's name), for people
	// Started and Ended: the driver's clock.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Steps as given ("1", "10%", "100%") and Sizes, the nodes reached
	// in all once each step passed.
	Steps []string `json:"steps"`
	Sizes []int    `json:"sizes"`
	// Nodes are the live nodes at the start, in the order the steps take
	// them (the canaries first, then by name).
	Nodes  []string `json:"nodes"`
	Canary []string `json:"canary,omitempty"`
	// MaxFailures as given ("0", "2", "10%") and MaxFailed, the NACKing
	// nodes tolerated over the whole rollout (a percentage of Nodes,
	// rounded down).
	MaxFailures string        `json:"maxFailures"`
	MaxFailed   int           `json:"maxFailed"`
	StepTimeout time.Duration `json:"-"`
	StepPause   time.Duration `json:"-"`
	// Tables are the tables whose state changes, with their previous and
	// new generations; Named are every table the rollout's state names
	// (the changed ones and those that stay as they are).
	Tables []RolloutTable `json:"tables"`
	Named  []string       `json:"named"`
	// Step is the index of the step under way (len(Steps) once all
	// passed); Switched how many of Nodes were switched to the new state
	// (the reached cohorts: always a prefix of Nodes).
	Step     int `json:"step"`
	Switched int `json:"switched"`
	// Answers are the last answers recorded per node; a NACK stays.
	Answers map[string]NodeAnswer `json:"answers,omitempty"`
	// Passed are the steps that passed, in order.
	Passed []RolloutStep `json:"passed,omitempty"`
	// Driver names the last driver ("HOST pid N" by default).
	Driver string `json:"driver,omitempty"`
	// Result and Reason, once finished: RolloutCompleted, or
	// RolloutRolledBack and why (the step, the failing nodes and their
	// errors, a timeout, an abort).
	Result string `json:"result,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Failing are the nodes that NACKed or did not answer when it halted.
	Failing []NodeAnswer `json:"failing,omitempty"`
	// Revision is the etcd revision of the transaction that finished the
	// rollout (read from the history key; 0 while it runs).
	Revision int64 `json:"revision,omitempty"`
}

// RolloutTable is one changed table of a rollout: the generation in force
// before it (the state it rolls back to) and the new one, or the delta
// over the old one ("d000000000009") that a small change is rolled out as.
type RolloutTable struct {
	Table string `json:"table"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// NodeAnswer is one node's answer to a rollout's step.
type NodeAnswer struct {
	Node   string `json:"node"`
	Answer string `json:"answer"` // AnswerACK, AnswerNACK or AnswerNone
	// Desired is the revision of the node's desired state the answer is
	// for; Reached the revision the node reported.
	Desired int64 `json:"desired"`
	Reached int64 `json:"reached"`
	// Errors are the node's reported errors (a NACK's), or why it has no
	// answer ("lost", "not live").
	Errors []string  `json:"errors,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// RolloutStep is what one step did.
type RolloutStep struct {
	Index int    `json:"index"` // 0-based
	Of    int    `json:"of"`    // how many steps
	Size  string `json:"size"`  // as given: "1", "50%"
	// Reached is how many nodes the step reached in all; New the nodes it
	// switched (empty when resumed after they were).
	Reached int      `json:"reached"`
	New     []string `json:"new,omitempty"`
	// ACK and NACK are the answers of the reached nodes when the step
	// ended; NoAnswer the nodes without one.
	ACK      []string     `json:"ack,omitempty"`
	NACK     []NodeAnswer `json:"nack,omitempty"`
	NoAnswer []NodeAnswer `json:"noAnswer,omitempty"`
	// Started and Ended: the driver's clock (a resumed step starts
	// again).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Result: StepSwitched or StepBaking (as RolloutSpec.Progress sees
	// it), StepPassed or StepHalted (as Step returns it).
	Result string `json:"result"`
}

// The results of a step (RolloutStep.Result).
const (
	StepSwitched = "switched" // its cohort is switched; the answers are awaited
	StepBaking   = "baking"   // every node answered; the step pauses before it passes
	StepPassed   = "passed"
	StepHalted   = "halted"
)

// Reached returns the nodes the rollout switched to its new state: the
// reached cohorts.
func (r Rollout) Reached() []string { return r.Nodes[:min(r.Switched, len(r.Nodes))] }

// Took is how long the step took.
func (s RolloutStep) Took() time.Duration {
	if s.Ended.IsZero() {
		return 0
	}
	return s.Ended.Sub(s.Started)
}

// Failures counts the nodes whose recorded answer is a NACK.
func (r Rollout) Failures() int {
	n := 0
	for _, a := range r.Answers {
		if a.Answer == AnswerNACK {
			n++
		}
	}
	return n
}

// MarshalJSON writes the durations as text.
func (r Rollout) MarshalJSON() ([]byte, error) {
	type plain Rollout // without this method
	return json.Marshal(struct {
		plain
		StepTimeout string `json:"stepTimeout"`
		StepPause   string `json:"stepPause"`
	}{plain(r), r.StepTimeout.String(), r.StepPause.String()})
}

// UnmarshalJSON reads what MarshalJSON wrote; a duration that does not
// parse is an error.
func (r *Rollout) UnmarshalJSON(b []byte) error {
	type plain Rollout
	var v struct {
		plain
		StepTimeout string `json:"stepTimeout"`
		StepPause   string `json:"stepPause"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Rollout(v.plain)
	var err error
	if r.StepTimeout, err = time.ParseDuration(v.StepTimeout); err != nil {
		return fmt.Errorf("stepTimeout: %w", err)
	}
	if r.StepPause, err = time.ParseDuration(v.StepPause); err != nil {
		return fmt.Errorf("stepPause: %w", err)
	}
	return nil
}

// check tells what makes a parsed state unusable: a driver acts on none
// of it then.
func (r *Rollout) check() error {
	switch {
	case r.ID == "":
		return errors.New("no id")
	case len(r.Steps) == 0 || len(r.Steps) != len(r.Sizes):
		return fmt.Errorf("%d steps and %d sizes", len(r.Steps), len(r.Sizes))
	case r.Step < 0 || r.Step > len(r.Steps):
		return fmt.Errorf("step %d of %d", r.Step, len(r.Steps))
	case r.Switched < 0 || r.Switched > len(r.Nodes):
		return fmt.Errorf("%d nodes switched of %d", r.Switched, len(r.Nodes))
	case len(r.Tables) == 0:
		return errors.New("no table changes")
	case r.StepTimeout <= 0:
		return fmt.Errorf("step timeout %v", r.StepTimeout)
	}
	for i, n := range r.Sizes {
		if n < 1 || n > len(r.Nodes) || (i > 0 && n < r.Sizes[i-1]) {
			return fmt.Errorf("step %d reaches %d of %d nodes", i+1, n, len(r.Nodes))
		}
	}
	for _, node := range r.Nodes {
		if err := checkName("node", node); err != nil {
			return err
		}
	}
	for _, t := range r.Tables {
		if checkName("table", t.Table) != nil || parseGen(t.Old) == 0 || (parseGen(t.New) == 0 && !isDelta(t.New)) {
			return fmt.Errorf("table %q: generations %q and %q", t.Table, t.Old, t.New)
		}
	}
	return nil
}

// parseRollout reads the state under key: an error naming the key and
// wrapping ErrRolloutUnreadable if it does not parse or is not usable.
func parseRollout(key string, value []byte) (*Rollout, error) {
	var r Rollout
	err := json.Unmarshal(value, &r)
	if err == nil {
		err = r.check()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrRolloutUnreadable, key, err)
	}
	return &r, nil
}

// RolloutDriverInfo is what the driver of a rollout writes under
// Layout.RolloutDriver, under its lease.
type RolloutDriverInfo struct {
	Driver  string    `json:"driver"`
	Rollout string    `json:"rollout"` // its ID
	Since   time.Time `json:"since"`
}
