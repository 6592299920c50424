package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RolloutSpec is what StartRollout rolls out, and how.
type RolloutSpec struct {
	// Tables is the new fleet-wide desired state, as ApplyTables takes it
	// for ScopeAll (table → name → value); a table missing is left alone.
	Tables map[string]map[string][]byte
	// Steps are the cohorts: ParseSteps("1,10%,50%,100%"). The last is
	// 100%.
	Steps []StepSize
	// Canary are nodes taken first, in this order; each must be live.
	Canary []string
	// MaxFailures is how many NACKing nodes the rollout tolerates over
	// all its steps (default: none).
	MaxFailures FailureLimit
	// StepTimeout is how long a step waits for every node of its cohort
	// to answer (default DefaultStepTimeout).
	StepTimeout time.Duration
	// StepPause is how long a step waits once every node answered before
	// it passes (a bake; default none).
	StepPause time.Duration
	// Source names what is rolled out (a file), for the history.
	Source string
	// Driver names the driver in RolloutStatus (default "HOST pid N").
	Driver string
	// Progress, if set, is called as each step goes: once its cohort is
	// switched (Result StepSwitched), and once every node answered, if the
	// step then pauses (StepBaking).
	Progress func(RolloutStep)
}

// defaultDriver is "HOST pid N".
func defaultDriver() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", cmp.Or(host, "localhost"), os.Getpid())
}

// rolloutName is a rollout's ID: r and its number, padded so that IDs
// sort as numbers.
func rolloutName(n uint64) string { return fmt.Sprintf("r%012d", n) }

// StartRollout starts a rollout of spec's state over the live nodes and
// returns its driver, which holds the rollout's lease (RolloutLeaseTTL):
// call Run (or Step until Done), then Close.
//
// Before it writes anything it checks the spec (steps that end in 100%,
// canaries that are live nodes, a step no larger than the fleet, names
// ApplyTables accepts, every live node's status readable: one that does
// not parse could never answer) and refuses a prefix where a rollout is
// under way or paused (ErrRolloutActive, naming it) or whose layout
// version it does not know (ErrUnknownLayout); a state equal to the one in force is
// ErrNothingToRollOut. Then it stages the change of each changed table,
// as a delta over the generation in force when the changes of all tables
// fit in the one transaction that will finish the rollout (so that a node
// switches by reading the change only), else as a new generation, and
// starts the rollout in one transaction, which also writes layout version
// 3 and gives a changed table with no generation in force an empty one
// (the state to roll back to). Of concurrent starts exactly
// one wins: the others fail with ErrRolloutActive, or with ErrConflict if
// an apply came in between, and leave nothing behind. When the start
// transaction's answer is lost (a timeout, a member gone, ctx ended) it
// reads whether it committed: a start that committed is never undone nor
// its staging dropped; it returns the driver, or, if it cannot drive
// (ctx ended, the lease's keep-alive failed), an error saying the
// rollout is paused (resume or abort it). What a start that could not
// tell leaves staged stays; the next apply that changes its tables
// removes it. No node is switched before the first Step.
func StartRollout(ctx context.Context, c *clientv3.Client, l Layout, spec RolloutSpec) (*RolloutDriver, error) {
	if c == nil {
		return nil, errors.New("rollout: client is nil")
	}
	r, err := planRollout(ctx, c, l, spec)
	if err != nil {
		return nil, fmt.Errorf("rollout not started: %w", err)
	}
	read, err := readInForce(ctx, c, l, ScopeAll, r.Named)
	if err != nil {
		return nil, fmt.Errorf("rollout not started: %w", err)
	}
	changed, err := diffTables(ctx, c, l, spec.Tables, r.Named, read)
	if err != nil {
		return nil, fmt.Errorf("rollout not started: %w", err)
	}
	if len(changed) == 0 {
		return nil, fmt.Errorf("%w (in force since revision %d)", ErrNothingToRollOut, read.lastMod)
	}
	counter, err := c.Get(ctx, l.RolloutCounter())
	if err != nil {
		return nil, fmt.Errorf("rollout not started: reading %s: %w", l.RolloutCounter(), err)
	}
	var n uint64
	var counterMod int64
	if len(counter.Kvs) > 0 {
		n, _ = strconv.ParseUint(strings.TrimPrefix(string(counter.Kvs[0].Value), "r"), 10, 64)
		counterMod = counter.Kvs[0].ModRevision
	}
	r.ID = rolloutName(n + 1)

	staged := &stagedRollout{c: c, l: l}
	ops, err := staged.stage(ctx, r, spec.Tables, changed)
	if err != nil {
		staged.drop(ctx)
		return nil, fmt.Errorf("rollout not started: %w", err)
	}
	put, err := json.Marshal(r)
	if err != nil {
		staged.drop(ctx)
		return nil, fmt.Errorf("rollout not started: %w", err)
	}
	d, claimed, err := startDriver(ctx, c, l, r, put, func(lease clientv3.LeaseID, info string) (*clientv3.TxnResponse, error) {
		guard := append(read.guard, clientv3.Compare(clientv3.ModRevision(l.RolloutCounter()), "=", counterMod))
		ops = append(ops, clientv3.OpPut(l.RolloutActive(), string(put)), clientv3.OpPut(l.RolloutDriver(), info, clientv3.WithLease(lease)),
			clientv3.OpPut(l.RolloutCounter(), r.ID), clientv3.OpPut(l.VersionKey(), strconv.Itoa(LayoutVersion)))
		return c.Txn(ctx).If(guard...).Then(ops...).Commit()
	})
	switch {
	case err == nil:
		d.progress = spec.Progress
		return d, nil
	case claimed == claimCommitted:
		// The rollout is in etcd and names what was staged: it stays,
		// paused (the lease is revoked), for resume or abort.
		return nil, fmt.Errorf("rollout %s started, then paused at once: %w (`fleet rollout resume` continues it, `fleet rollout abort` rolls it back)", r.ID, err)
	case claimed == claimUnknown || staged.referenced(ctx):
		return nil, fmt.Errorf("rollout %s not known to have started: %w (`fleet rollout status` says; its staged generations stay while a rollout may name them)", r.ID, err)
	}
	staged.drop(ctx)
	if errors.Is(err, errClaimFailed) {
		err = startRefused(ctx, c, l, read.rev)
	}
	return nil, fmt.Errorf("rollout not started: %w", err)
}

// errClaimFailed: the transaction that claims a rollout did not succeed.
var errClaimFailed = errors.New("claim failed")

// What became of a claim transaction, as startDriver knows it.
type claimOutcome int

const (
	claimNotCommitted claimOutcome = iota // refused, or never sent
	claimCommitted                        // in etcd, even if startDriver failed after it
	claimUnknown                          // its answer was lost and etcd could not be read
)

// startDriver grants the driver's lease and claims the rollout with
// claim's transaction (given the lease and the driver key's value), which
// puts put as the rollout's state; a claim that does not succeed is
// errClaimFailed. When the claim's answer is lost (a timeout, a member
// gone, ctx ended), it reads whether the claim committed (the driver key
// under its lease, beside the rollout's state as put), and if it did the
// driver goes on. It says what became of the claim: a caller must keep
// what a committed (or unknown) claim names.
func startDriver(ctx context.Context, c *clientv3.Client, l Layout, r *Rollout, put []byte,
	claim func(clientv3.LeaseID, string) (*clientv3.TxnResponse, error)) (*RolloutDriver, claimOutcome, error) {
	lease, err := c.Grant(ctx, leaseSeconds(RolloutLeaseTTL))
	if err != nil {
		return nil, claimNotCommitted, fmt.Errorf("granting the driver's lease: %w", err)
	}
	info, _ := json.Marshal(RolloutDriverInfo{Driver: r.Driver, Rollout: r.ID, Since: time.Now().UTC()})
	var version int64
	tr, err := claim(lease.ID, string(info))
	switch {
	case err == nil && !tr.Succeeded:
		revokeSoon(ctx, c, lease.ID)
		return nil, claimNotCommitted, errClaimFailed
	case err == nil:
		version = tr.Header.Revision
	default:
		mod, outcome := claimCommittedAt(ctx, c, l, lease.ID, put)
		if outcome != claimCommitted || ctx.Err() != nil {
			revokeSoon(ctx, c, lease.ID)
			return nil, outcome, err
		}
		version = mod
	}
	s := &etcdStore{c: c, l: l, lease: lease.ID, version: version}
	if err := s.keepAlive(ctx); err != nil {
		revokeSoon(ctx, c, lease.ID)
		return nil, claimCommitted, err
	}
	return &RolloutDriver{store: s, r: r}, claimCommitted, nil
}

// claimCommittedAt tells, after a claim's answer was lost, whether it
// committed: the driver key is under its lease (no other write puts it
// there) beside the rollout's state as it put it; then also the active
// key's ModRevision. A claim that committed but whose lease expired since
// reads as not committed: the caller cannot drive it, and StartRollout
// keeps what a rollout under way names (stagedRollout.referenced).
func claimCommittedAt(ctx context.Context, c *clientv3.Client, l Layout, lease clientv3.LeaseID, put []byte) (int64, claimOutcome) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	resp, err := c.Txn(cctx).Then(clientv3.OpGet(l.RolloutActive()), clientv3.OpGet(l.RolloutDriver())).Commit()
	if err != nil {
		return 0, claimUnknown
	}
	active, driver := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(driver) != 1 || clientv3.LeaseID(driver[0].Lease) != lease || len(active) != 1 || string(active[0].Value) != string(put) {
		return 0, claimNotCommitted
	}
	return active[0].ModRevision, claimCommitted
}

// startRefused says why a start transaction failed after the read at rev:
// a rollout that started meanwhile, or another write.
func startRefused(ctx context.Context, c *clientv3.Client, l Layout, rev int64) error {
	resp, err := c.Get(ctx, l.RolloutActive())
	if err == nil {
		if err := rolloutUnderWay(l, resp.Kvs); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w (a table, the layout version or the rollout counter changed since it was read at revision %d)", ErrConflict, rev)
}

// rolloutUnderWay is the error for an active key as read (kvs: none or
// one): nil if there is none.
func rolloutUnderWay(l Layout, kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return nil
	}
	r, err := parseRollout(l.RolloutActive(), kvs[0].Value)
	if err != nil {
		return fmt.Errorf("%w (%v; `fleet rollout abort` rolls it back)", ErrRolloutActive, err)
	}
	return fmt.Errorf("%w: rollout %s, started %s, at step %d of %d (see `fleet rollout status`; abort it first, or apply with --force)",
		ErrRolloutActive, r.ID, r.Started.Format(time.RFC3339), r.Step+1, len(r.Steps))
}

// planRollout checks spec and makes the rollout's state before anything
// is written: the live nodes in order, the steps' sizes, the failures
// tolerated.
func planRollout(ctx context.Context, c *clientv3.Client, l Layout, spec RolloutSpec) (*Rollout, error) {
	names, err := checkApply(ScopeAll, spec.Tables)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no table to roll out")
	}
	var stepText []string
	for _, st := range spec.Steps {
		stepText = append(stepText, st.String())
	}
	if _, err := ParseSteps(strings.Join(stepText, ",")); err != nil {
		return nil, fmt.Errorf("steps: %w", err)
	}
	if _, err := ParseFailureLimit(spec.MaxFailures.String()); err != nil {
		return nil, fmt.Errorf("max failures: %w", err)
	}
	switch {
	case spec.StepTimeout < 0:
		return nil, fmt.Errorf("step timeout %v: must be positive", spec.StepTimeout)
	case spec.StepPause < 0:
		return nil, fmt.Errorf("step pause %v: must not be negative", spec.StepPause)
	}
	for _, n := range spec.Canary {
		if err := checkName("canary node", n); err != nil {
			return nil, err
		}
	}
	view, err := Fleet(ctx, c, l)
	if err != nil {
		return nil, err
	}
	var live []string
	for _, n := range view.Nodes {
		live = append(live, n.Node)
	}
	// A node whose status does not parse could never answer: refused
	// rather than planned into a cohort that cannot pass.
	for _, w := range view.Warnings {
		if node, ok := strings.CutPrefix(w.Key, l.StatusPrefix()); ok && slices.Contains(live, node) && strings.HasPrefix(w.Problem, unreadableStatus) {
			return nil, fmt.Errorf("node %s: its status %s does not parse, so it could never answer a step (%s); fix or remove the key, or stop the node", node, w.Key, w.Problem)
		}
	}
	if len(live) == 0 {
		return nil, errors.New("no live node in the fleet: a rollout goes by the nodes' answers")
	}
	order, err := rolloutOrder(live, spec.Canary)
	if err != nil {
		return nil, err
	}
	sizes, err := rolloutSizes(spec.Steps, len(order))
	if err != nil {
		return nil, err
	}
	return &Rollout{
		Source: spec.Source, Started: time.Now().UTC(), Steps: stepText, Sizes: sizes, Nodes: order, Canary: spec.Canary,
		MaxFailures: spec.MaxFailures.String(), MaxFailed: spec.MaxFailures.Nodes(len(order)),
		StepTimeout: cmp.Or(spec.StepTimeout, DefaultStepTimeout), StepPause: spec.StepPause,
		Named: names, Driver: cmp.Or(spec.Driver, defaultDriver()),
	}, nil
}
