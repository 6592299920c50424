package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RolloutState is the rollout under way, as RolloutStatus reads it.
type RolloutState struct {
	Rollout Rollout `json:"rollout"`
	// State is RolloutRunning (Driver holds it) or RolloutPaused.
	State  string             `json:"state"`
	Driver *RolloutDriverInfo `json:"driver,omitempty"`
	// Now are the reached nodes' answers as read now (the recorded NACKs
	// stay NACKs).
	Now []NodeAnswer `json:"now,omitempty"`
	// Revision is the etcd revision it was read at.
	Revision int64 `json:"revision"`
}

// RolloutStatus reads the rollout under way: nil when there is none. A
// state that does not parse is an error wrapping ErrRolloutUnreadable that
// names the key; so is a layout version this package does not know
// (ErrUnknownLayout).
func RolloutStatus(ctx context.Context, c *clientv3.Client, l Layout) (*RolloutState, error) {
	resp, err := c.Txn(ctx).Then(clientv3.OpGet(l.VersionKey()), clientv3.OpGet(l.RolloutActive()), clientv3.OpGet(l.RolloutDriver())).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the rollout under way: %w", err)
	}
	if err := checkVersion(l, resp.Responses[0].GetResponseRange().Kvs); err != nil {
		return nil, err
	}
	active, driver := resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs
	if len(active) == 0 {
		return nil, nil
	}
	r, err := parseRollout(l.RolloutActive(), active[0].Value)
	if err != nil {
		return nil, err
	}
	st := &RolloutState{Rollout: *r, State: RolloutPaused, Revision: resp.Header.Revision}
	if len(driver) > 0 {
		st.State = RolloutRunning
		var info RolloutDriverInfo
		if json.Unmarshal(driver[0].Value, &info) != nil {
			info = RolloutDriverInfo{Driver: fmt.Sprintf("unreadable (%s holds %q)", l.RolloutDriver(), driver[0].Value)}
		}
		st.Driver = &info
	}
	s := &etcdStore{c: c, l: l}
	obs, _, err := s.observe(ctx, r, r.Reached(), false)
	if err != nil {
		return nil, err
	}
	for _, node := range r.Reached() {
		a := answerOf(node, obs[node], time.Now())
		if old, ok := r.Answers[node]; ok && old.Answer == AnswerNACK {
			a = old
		}
		st.Now = append(st.Now, a)
	}
	return st, nil
}

// ResumeOptions are ResumeRollout's.
type ResumeOptions struct {
	// Driver names the new driver (default "HOST pid N").
	Driver string
	// StepTimeout and StepPause, if set, replace the rollout's.
	StepTimeout, StepPause *time.Duration
	// Progress is as RolloutSpec.Progress.
	Progress func(RolloutStep)
}

// ResumeRollout takes a paused rollout over: it returns a driver holding
// it, whose next Step runs the step under way again (the nodes switched
// stay, recorded NACKs stay, the answers are awaited anew). Errors:
// ErrNoRollout, ErrRolloutDriven (a live driver holds it: it is not
// paused), ErrRolloutUnreadable (its state does not parse: nothing is
// done from it), ErrUnknownLayout, a bad option, etcd's. Of concurrent
// resumes exactly one wins.
func ResumeRollout(ctx context.Context, c *clientv3.Client, l Layout, opts ResumeOptions) (*RolloutDriver, error) {
	if c == nil {
		return nil, errors.New("rollout: client is nil")
	}
	if (opts.StepTimeout != nil && *opts.StepTimeout <= 0) || (opts.StepPause != nil && *opts.StepPause < 0) {
		return nil, errors.New("resume: a step timeout must be positive, a step pause not negative")
	}
	resp, err := c.Txn(ctx).Then(clientv3.OpGet(l.VersionKey()), clientv3.OpGet(l.RolloutActive()), clientv3.OpGet(l.RolloutDriver())).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the rollout under way: %w", err)
	}
	if err := checkVersion(l, resp.Responses[0].GetResponseRange().Kvs); err != nil {
		return nil, err
	}
	active, driver := resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs
	if len(active) == 0 {
		return nil, fmt.Errorf("resume: %w", ErrNoRollout)
	}
	r, err := parseRollout(l.RolloutActive(), active[0].Value)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if len(driver) > 0 {
		return nil, fmt.Errorf("resume: %w: rollout %s is driven by %s; it is paused once its driver stops (at most %v after it died)",
			ErrRolloutDriven, r.ID, driverName(driver[0].Value), RolloutLeaseTTL)
	}
	if opts.StepTimeout != nil {
		r.StepTimeout = *opts.StepTimeout
	}
	if opts.StepPause != nil {
		r.StepPause = *opts.StepPause
	}
	r.Driver = cmp.Or(opts.Driver, defaultDriver())
	put, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	d, claimed, err := startDriver(ctx, c, l, r, put, func(lease clientv3.LeaseID, info string) (*clientv3.TxnResponse, error) {
		return c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(l.RolloutActive()), "=", active[0].ModRevision),
			clientv3.Compare(clientv3.CreateRevision(l.RolloutDriver()), "=", 0)).
			Then(clientv3.OpPut(l.RolloutActive(), string(put)), clientv3.OpPut(l.RolloutDriver(), info, clientv3.WithLease(lease))).Commit()
	})
	if errors.Is(err, errClaimFailed) {
		return nil, fmt.Errorf("resume: %w: rollout %s was taken over or finished meanwhile", ErrRolloutDriven, r.ID)
	}
	if claimed == claimCommitted && err != nil {
		return nil, fmt.Errorf("resume: rollout %s taken over, then paused again at once: %w", r.ID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	d.progress = opts.Progress
	return d, nil
}

// AbortRollout rolls the rollout under way back, whether a driver runs it
// or it is paused: in one transaction every reached node returns to the
// previous state, the rollout goes to the history as RolloutRolledBack
// ("aborted", and reason), and its driver, if any, fails with
// ErrRolloutLost at its next read or write. It returns the finished
// rollout (Revision: the transaction's). It does not wait for the nodes:
// DesiredRevision and their statuses say when they applied it.
//
// A state that does not parse is rolled back with what etcd holds: every
// pin under the prefix is removed (and the current keys of their tables
// rewritten; a table with none gets an empty generation in force, so that
// every pinned node reads its state anew); its staged generations are
// left behind, named in the history's reason. Either way the history
// keeps its last RolloutHistoryKept entries. Errors: ErrNoRollout, ErrUnknownLayout, ErrConflict
// (the rollout changed meanwhile: read it again), etcd's.
func AbortRollout(ctx context.Context, c *clientv3.Client, l Layout, reason string) (Rollout, error) {
	if c == nil {
		return Rollout{}, errors.New("rollout: client is nil")
	}
	resp, err := c.Txn(ctx).Then(clientv3.OpGet(l.VersionKey()), clientv3.OpGet(l.RolloutActive())).Commit()
	if err != nil {
		return Rollout{}, fmt.Errorf("reading the rollout under way: %w", err)
	}
	if err := checkVersion(l, resp.Responses[0].GetResponseRange().Kvs); err != nil {
		return Rollout{}, err
	}
	active := resp.Responses[1].GetResponseRange().Kvs
	if len(active) == 0 {
		return Rollout{}, fmt.Errorf("abort: %w", ErrNoRollout)
	}
	why := "aborted"
	if reason != "" {
		why += ": " + reason
	}
	r, perr := parseRollout(l.RolloutActive(), active[0].Value)
	if perr != nil {
		return abortUnreadable(ctx, c, l, active[0].ModRevision, why, perr)
	}
	r.Result, r.Reason, r.Ended = RolloutRolledBack, why, time.Now().UTC()
	s := &etcdStore{c: c, l: l, version: active[0].ModRevision}
	rev, err := s.finish(ctx, r)
	if errors.Is(err, ErrRolloutLost) {
		err = fmt.Errorf("%w: rollout %s changed while it was aborted; read it again (%v)", ErrConflict, r.ID, err)
	}
	if err != nil {
		return Rollout{}, fmt.Errorf("abort: %w", err)
	}
	r.Revision = rev
	return *r, nil
}

// abortUnreadable rolls back a rollout whose state does not parse: the
// pins found under the prefix are removed and the current keys of their
// tables rewritten (an empty generation where there is none), in one
// transaction guarded by the state as read, which trims the history too.
func abortUnreadable(ctx context.Context, c *clientv3.Client, l Layout, mod int64, why string, perr error) (Rollout, error) {
	resp, err := c.Get(ctx, l.Desired(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return Rollout{}, fmt.Errorf("abort: finding the pins: %w", err)
	}
	var tables []string
	for _, kv := range resp.Kvs {
		table, rest, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), l.Desired()), "/")
		if strings.HasPrefix(rest, ScopeAll+"/pin/") && !slices.Contains(tables, table) {
			tables = append(tables, table)
		}
	}
	r := Rollout{ID: "unreadable", Result: RolloutRolledBack, Ended: time.Now().UTC(),
		Reason: fmt.Sprintf("%s; its state did not parse (%v): the pins of %s removed, its staged generations left behind",
			why, perr, strings.Join(tables, ", "))}
	ops := []clientv3.Op{clientv3.OpDelete(l.RolloutActive()), clientv3.OpDelete(l.RolloutDriver())}
	for _, table := range tables {
		// Every node whose pin goes must read its table's state anew,
		// past the pins: the current key is rewritten, or, where there is
		// none (a node would read nothing newer and stay "applied" at the
		// pinned state), an empty generation is put in force.
		cur, err := c.Get(ctx, l.Current(table, ScopeAll))
		if err != nil {
			return Rollout{}, fmt.Errorf("abort: %w", err)
		}
		gen := ""
		if len(cur.Kvs) > 0 {
			gen = string(cur.Kvs[0].Value)
		} else if gen, err = nextGeneration(ctx, c, l, table, ScopeAll); err != nil {
			return Rollout{}, fmt.Errorf("abort: %w", err)
		}
		ops = append(ops, clientv3.OpPut(l.Current(table, ScopeAll), gen))
	}
	for _, table := range tables {
		ops = append(ops, clientv3.OpDelete(l.PinPrefix(table), clientv3.WithPrefix()))
	}
	id := fmt.Sprintf("unreadable-%d", mod)
	trim, err := historyTrim(ctx, c, l, id)
	if err != nil {
		return Rollout{}, fmt.Errorf("abort: %w", err)
	}
	b, _ := json.Marshal(r)
	proof := kvPut{l.RolloutHistory() + id, string(b)}
	ops = append(append(ops, clientv3.OpPut(proof.key, proof.value)), trim...)
	s := &etcdStore{c: c, l: l, version: mod}
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(l.RolloutActive()), "=", mod)).Then(ops...).Commit()
	switch {
	case err != nil:
		// The answer was lost: the history entry says whether it
		// committed.
		rev, ok := s.committed(ctx, proof)
		if !ok {
			return Rollout{}, fmt.Errorf("abort: %w", err)
		}
		r.Revision = rev
		return r, nil
	case !tr.Succeeded:
		return Rollout{}, fmt.Errorf("abort: %w: %s changed meanwhile; read it again", ErrConflict, l.RolloutActive())
	}
	r.Revision = tr.Header.Revision
	return r, nil
}

// RolloutHistory reads the finished rollouts, oldest first (at most
// RolloutHistoryKept), each with the revision that finished it. A key
// that does not hold a rollout is named in a warning and skipped.
func RolloutHistory(ctx context.Context, c *clientv3.Client, l Layout) ([]Rollout, []Warning, error) {
	resp, err := c.Txn(ctx).Then(clientv3.OpGet(l.VersionKey()),
		clientv3.OpGet(l.RolloutHistory(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))).Commit()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the rollout history: %w", err)
	}
	if err := checkVersion(l, resp.Responses[0].GetResponseRange().Kvs); err != nil {
		return nil, nil, err
	}
	var out []Rollout
	var warnings []Warning
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var r Rollout
		if err := json.Unmarshal(kv.Value, &r); err != nil || r.ID == "" || r.Result == "" {
			warnings = append(warnings, Warning{Key: string(kv.Key), Problem: fmt.Sprintf("not a finished rollout (%v); skipped", cmp.Or[error](err, errors.New("no id or result")))})
			continue
		}
		r.Revision = kv.CreateRevision
		out = append(out, r)
	}
	return out, warnings, nil
}
