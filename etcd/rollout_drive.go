package etcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// retryPause is how long a driver waits before it reads its nodes again
// after a failed read (etcd unreachable): it keeps trying until its lease
// is gone.
const retryPause = 500 * time.Millisecond

// RolloutDriver drives one rollout: StartRollout or ResumeRollout returns
// it, holding the rollout's lease. Step runs the next step; Run all of
// them. A driver is used by one goroutine.
type RolloutDriver struct {
	store    rolloutStore
	r        *Rollout
	progress func(RolloutStep)
	back     []NodeAnswer
}

// Rollout returns the rollout as the driver last wrote it.
func (d *RolloutDriver) Rollout() Rollout { return *d.r.clone() }

// Done tells whether the rollout is finished (completed or rolled back).
func (d *RolloutDriver) Done() bool { return d.r.Result != "" }

// RolledBack returns, after a halt, the answers of the reached nodes to
// the previous state: each of them ACKs once it applied it again (the
// driver waits for that up to the step timeout).
func (d *RolloutDriver) RolledBack() []NodeAnswer { return slices.Clone(d.back) }

// Close gives the rollout up without finishing it: it is paused at once
// (the lease is revoked). After a finished rollout it only ends the
// lease's keep-alive.
func (d *RolloutDriver) Close(ctx context.Context) error { return d.store.release(ctx) }

// Run runs the steps left until the rollout is finished, calling each
// with every step's result. It returns the finished rollout, and an error
// wrapping ErrRolloutHalted when it was rolled back; on any other error
// the rollout is not finished (see Step).
func (d *RolloutDriver) Run(ctx context.Context, each func(RolloutStep)) (Rollout, error) {
	for !d.Done() {
		st, err := d.Step(ctx)
		if err != nil {
			return d.Rollout(), err
		}
		if each != nil {
			each(st)
		}
	}
	r := d.Rollout()
	if r.Result == RolloutRolledBack {
		return r, fmt.Errorf("rollout %s: %w: %s", r.ID, ErrRolloutHalted, r.Reason)
	}
	return r, nil
}

// Step runs the step under way to its end: it switches the step's new
// nodes to the new state (whole nodes in each transaction), calls the
// driver's progress callback, and waits for every reached node's answer.
// More NACKing nodes than the rollout tolerates, or a node of the cohort
// without an answer when the step timeout passes, halts the rollout: the
// reached nodes are rolled back to the previous state in one transaction,
// and Step waits (up to the step timeout) for them to apply it
// (RolledBack). Once every node answered, the step pauses for the
// rollout's step pause (a NACK meanwhile counts too), then it passes; the
// last step's passing completes the rollout.
//
// Errors: ErrRolloutLost (the rollout was aborted, or the driver's lease
// expired: it writes nothing more), ctx's, etcd's on a write (the rollout
// stays as last written; it is paused once the lease expires, and
// ResumeRollout runs the step again). A step run again keeps its switched
// nodes and recorded NACKs and waits for the answers anew.
func (d *RolloutDriver) Step(ctx context.Context) (RolloutStep, error) {
	r := d.r.clone()
	if r.Result != "" {
		return RolloutStep{}, fmt.Errorf("rollout %s: %w (%s)", r.ID, errFinished, r.Result)
	}
	k := r.Step
	st := RolloutStep{Index: k, Of: len(r.Steps), Size: r.Steps[k], Reached: r.Sizes[k], Started: time.Now()}
	if err := d.switchCohort(ctx, r, &st); err != nil {
		return st, err
	}
	if d.progress != nil {
		d.progress(st)
	}
	deadline := st.Started.Add(r.StepTimeout)
	var bakeEnd time.Time
	for {
		obs, rev, err := d.store.observe(ctx, d.r, d.r.Reached(), true)
		if err != nil {
			if errors.Is(err, ErrRolloutLost) {
				return st, err
			}
			if werr := sleepCtx(ctx, retryPause); werr != nil {
				return st, werr
			}
			continue
		}
		now := time.Now()
		if err := d.record(ctx, obs, now); err != nil {
			return st, err
		}
		r = d.r
		st.ACK, st.NACK, st.NoAnswer = r.answersOf(r.Reached())
		switch {
		case r.Failures() > r.MaxFailed:
			return d.halt(ctx, st, fmt.Sprintf("step %d of %d (%s): %s", k+1, len(r.Steps), r.Steps[k], r.failuresText()))
		case len(st.NoAnswer) == 0 && bakeEnd.IsZero():
			bakeEnd = now.Add(r.StepPause)
			if d.progress != nil && r.StepPause > 0 {
				baking := st
				baking.Result = StepBaking
				d.progress(baking)
			}
		case len(st.NoAnswer) > 0 && !now.Before(deadline):
			return d.halt(ctx, st, fmt.Sprintf("step %d of %d (%s): not acknowledged within %v: %s", k+1, len(r.Steps), r.Steps[k], r.StepTimeout, answersText(st.NoAnswer)))
		}
		until := deadline
		if len(st.NoAnswer) == 0 {
			if !now.Before(bakeEnd) {
				return d.pass(ctx, st)
			}
			until = bakeEnd
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		err = d.store.wait(wctx, rev)
		cancel()
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			if werr := sleepCtx(ctx, retryPause); werr != nil {
				return st, werr
			}
		}
	}
}

// switchCohort switches the nodes of r's step under way that are not yet,
// as many whole nodes per transaction as fit, recording each batch in the
// same transaction.
func (d *RolloutDriver) switchCohort(ctx context.Context, r *Rollout, st *RolloutStep) error {
	for size := r.Sizes[r.Step]; r.Switched < size; {
		n := min(size-r.Switched, d.store.pinBatch(r))
		nodes := r.Nodes[r.Switched : r.Switched+n]
		next := r.clone()
		next.Switched += n
		if err := d.store.switchNodes(ctx, next, nodes); err != nil {
			return err
		}
		d.r, r = next, next
		st.New = append(st.New, nodes...)
	}
	st.Result = StepSwitched
	return nil
}

// record takes the reached nodes' answers as observed: a NACK stays
// recorded; a new NACK is written at once, so that a driver that resumes
// counts it.
func (d *RolloutDriver) record(ctx context.Context, obs map[string]nodeObs, now time.Time) error {
	next := d.r.clone()
	if next.Answers == nil {
		next.Answers = map[string]NodeAnswer{}
	}
	nack := false
	for _, node := range next.Reached() {
		if old, ok := next.Answers[node]; ok && old.Answer == AnswerNACK {
			continue
		}
		a := answerOf(node, obs[node], now)
		if a.Answer == AnswerNACK {
			nack = true
		}
		next.Answers[node] = a
	}
	if nack {
		if err := d.store.save(ctx, next); err != nil {
			return err
		}
	}
	d.r = next
	return nil
}

// answerOf is a node's answer as observed: ACK when it applied its
// desired state, NACK when it received it and reports failures, else
// none (with why).
func answerOf(node string, o nodeObs, now time.Time) NodeAnswer {
	a := NodeAnswer{Node: node, Answer: AnswerNone, Desired: o.desired, Reached: o.status.Revision, At: now}
	switch {
	case !o.live:
		a.Errors = []string{"not live (no status: lost, stopped or not started)"}
	case o.status.Failed(o.desired):
		a.Answer, a.Errors = AnswerNACK, o.status.Errors
		if len(a.Errors) == 0 {
			a.Errors = []string{fmt.Sprintf("objects %v", o.status.Objects)}
		}
	case o.status.Applied(o.desired):
		a.Answer = AnswerACK
	case !o.status.Received(o.desired):
		a.Errors = []string{fmt.Sprintf("at revision %d, its desired state is at %d", o.status.Revision, o.desired)}
	default:
		a.Errors = []string{fmt.Sprintf("applying: objects %v", o.status.Objects)}
	}
	return a
}

// pass ends a step whose nodes all answered: the next step, or the end.
func (d *RolloutDriver) pass(ctx context.Context, st RolloutStep) (RolloutStep, error) {
	st.Result, st.Ended = StepPassed, time.Now()
	next := d.r.clone()
	next.Passed = append(next.Passed, st)
	next.Step++
	if next.Step < len(next.Steps) {
		if err := d.store.save(ctx, next); err != nil {
			return st, err
		}
		d.r = next
		return st, nil
	}
	next.Result, next.Ended = RolloutCompleted, st.Ended
	rev, err := d.store.finish(ctx, next)
	if err != nil {
		return st, err
	}
	next.Revision = rev
	d.r = next
	return st, nil
}

// halt rolls the rollout back for reason and waits, up to the step
// timeout, for the reached nodes to apply the previous state.
func (d *RolloutDriver) halt(ctx context.Context, st RolloutStep, reason string) (RolloutStep, error) {
	st.Result, st.Ended = StepHalted, time.Now()
	next := d.r.clone()
	next.Result, next.Reason, next.Ended = RolloutRolledBack, reason, st.Ended
	next.Failing = append(slices.Clone(st.NACK), st.NoAnswer...)
	rev, err := d.store.finish(ctx, next)
	if err != nil {
		return st, err
	}
	next.Revision = rev
	d.r = next
	d.back = waitBack(ctx, d.store, next, rev)
	return st, nil
}

// waitBack waits, up to r's step timeout, until each reached node
// answers for its desired state at or past rev (the rollback), and
// returns the answers last read.
func waitBack(ctx context.Context, s rolloutStore, r *Rollout, rev int64) []NodeAnswer {
	ctx, cancel := context.WithTimeout(ctx, r.StepTimeout)
	defer cancel()
	out, _ := waitAnswers(ctx, s, r, r.Reached(), rev)
	return out
}

// waitAnswers waits until each of nodes answers for its desired state at
// or past rev, and returns the answers last read; ctx's error if it ended
// first.
func waitAnswers(ctx context.Context, s rolloutStore, r *Rollout, nodes []string, rev int64) ([]NodeAnswer, error) {
	var out []NodeAnswer
	for {
		obs, read, err := s.observe(ctx, r, nodes, false)
		if err == nil {
			out = out[:0]
			done := true
			for _, node := range nodes {
				a := answerOf(node, obs[node], time.Now())
				if a.Desired < rev {
					a.Answer, a.Errors = AnswerNone, []string{fmt.Sprintf("desired state read at revision %d, before %d", a.Desired, rev)}
				}
				done = done && a.Answer != AnswerNone
				out = append(out, a)
			}
			if done {
				return out, nil
			}
			err = s.wait(ctx, read)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if err != nil {
			sleepCtx(ctx, retryPause)
		}
	}
}

// WaitAnswers waits until each of nodes answers for its desired state in
// tables at or past revision rev: an ACK (it applied it) or a NACK (it
// reports failures for it). It returns each node's answer as last read,
// in nodes' order, and ctx's error if ctx ended first (a node without an
// answer then says why: not live, behind, applying). After AbortRollout,
// it tells when the reached nodes are back at the previous state.
func WaitAnswers(ctx context.Context, c *clientv3.Client, l Layout, tables, nodes []string, rev int64) ([]NodeAnswer, error) {
	if c == nil {
		return nil, errors.New("wait answers: client is nil")
	}
	return waitAnswers(ctx, &etcdStore{c: c, l: l}, &Rollout{Named: tables}, nodes, rev)
}

// answersOf sorts the recorded answers of nodes into ACKs, NACKs and
// none, in nodes' order.
func (r *Rollout) answersOf(nodes []string) (ack []string, nack, none []NodeAnswer) {
	for _, node := range nodes {
		a, ok := r.Answers[node]
		switch {
		case !ok:
			none = append(none, NodeAnswer{Node: node, Answer: AnswerNone})
		case a.Answer == AnswerACK:
			ack = append(ack, node)
		case a.Answer == AnswerNACK:
			nack = append(nack, a)
		default:
			none = append(none, a)
		}
	}
	return ack, nack, none
}

// failuresText says which nodes failed, beyond the limit.
func (r *Rollout) failuresText() string {
	var nack []NodeAnswer
	for _, node := range slices.Sorted(maps.Keys(r.Answers)) {
		if a := r.Answers[node]; a.Answer == AnswerNACK {
			nack = append(nack, a)
		}
	}
	return fmt.Sprintf("%d node(s) failed, more than --max-failures %s (%d): %s", len(nack), r.MaxFailures, r.MaxFailed, answersText(nack))
}

// answersText lists answers as "node: error; error, node: ...".
func answersText(as []NodeAnswer) string {
	var parts []string
	for _, a := range as {
		if len(a.Errors) == 0 {
			parts = append(parts, a.Node)
			continue
		}
		parts = append(parts, a.Node+": "+strings.Join(a.Errors, "; "))
	}
	return strings.Join(parts, ", ")
}

// clone copies r deep enough for the driver to change the copy.
func (r *Rollout) clone() *Rollout {
	c := *r
	c.Answers = maps.Clone(r.Answers)
	c.Passed = slices.Clone(r.Passed)
	c.Failing = slices.Clone(r.Failing)
	return &c
}

// sleepCtx waits d, or until ctx ends (its error then).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
