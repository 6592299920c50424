package iptables

import (
	"context"
	"fmt"
	"iter"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/internal/shrink"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Defaults of TargetConfig.
const (
	DefaultChainPrefix    = "STEADYSTATE"
	DefaultRestoreCommand = "iptables-restore"
	DefaultSaveCommand    = "iptables-save"
)

// MaxCulpritsPerBatch bounds how many rejected rules one batch singles out
// (one extra iptables-restore each) before it fails its remaining entries
// with the error, to be retried.
const MaxCulpritsPerBatch = 32

// TargetConfig configures a Target.
type TargetConfig struct {
	// NetNS is the network namespace whose rules are managed: the path of
	// a namespace file (/var/run/netns/NAME, /proc/PID/ns/net) or the name
	// of one under /var/run/netns. "" is the process's own. It is entered
	// at each operation, so it may be created after NewTarget.
	NetNS string
	// Rules is the table of desired rules (the one the reconciler
	// reconciles). Required: a batch brings each chain it touches to
	// its desired content in the snapshot it is given.
	Rules statedb.Table[*Rule]
	// ChainPrefix names the target's chains: "<prefix>-<built-in chain>".
	// Every chain of a table whose name starts with "<prefix>-" belongs to
	// the target. Default DefaultChainPrefix; at most 16 characters of
	// A-Z, 0-9, "_" and "-".
	ChainPrefix string
	// RestoreCommand and SaveCommand are the programs used. Defaults
	// DefaultRestoreCommand and DefaultSaveCommand (ip6tables-restore and
	// ip6tables-save manage IPv6).
	RestoreCommand, SaveCommand string
	// DisableWatch turns the drift watch off (see watch.go): rules changed
	// behind the target's back are then repaired only by the reconciler's
	// refresh by age (RefreshInterval) and prune.
	DisableWatch bool
	// Texts, if set, keeps how iptables shows the target's rules across
	// restarts (see texts.go): a restarted target then recognizes the
	// rules already in place without learning them in a scratch
	// namespace. Optional: without it they are learned.
	Texts TextStore
	// CheckInterval is how often, on the legacy backend (which sends no
	// notifications), the watch reads the tables to see whether its chains
	// changed. Default DefaultCheckInterval; negative: never.
	CheckInterval time.Duration
}

// Target applies desired rules with iptables-restore and reads them back
// with iptables-save. It implements reconciler.Target[*Rule],
// reconciler.BatchTarget[*Rule], reconciler.Planner[*Rule] and
// reconciler.BatchPlanner[*Rule] (plan.go), and
// reconciler.DriftTarget[*Rule] (watch.go); operations are serialized.
type Target struct {
	ns                  netnsutil.NS
	rules               statedb.Table[*Rule]
	prefix              string
	restoreCmd, saveCmd string

	// The drift watch (watch.go).
	noWatch     bool
	checkEvery  time.Duration
	eventBuffer int // the notifications' receive buffer; 0: eventBuffer (tests make it small)
	own         ownPIDs
	ownFilter   ownFilter // of the watch's socket (ownfilter.go)
	stats       watchStats
	saves       atomic.Uint64 // iptables-save runs of one table (save)
	scratches   atomic.Uint64 // scratch namespaces texts were learned in (learn.go)
	backendOnce sync.Once
	nft         bool // the save command writes nf_tables
	backendErr  error
	restoreOnce sync.Once
	restoreNFT  bool // the restore command writes nf_tables
	// If set (by tests): heard is told every generation the watch reads,
	// subscribed when the watch has subscribed and reported everything.
	heard      func(gen uint32)
	subscribed func()

	mu sync.Mutex
	// rejected holds, by key, the canonical spec of rules iptables-restore
	// rejected. They are left out of batches for other rules (so one bad
	// rule costs no extra iptables-restore per round) until the rule
	// changes or is retried on its own.
	rejected map[string]string
	// prepared caches, by rule, the checked and rendered form of the
	// object it was last prepared from (objects are immutable), so that a
	// rule is parsed once, not in every batch that touches its chain.
	prepared map[ruleID]preparedRule
	// written is what the target last wrote into each owned chain it
	// manages, in chain order: how it recognizes its rules (see identify).
	written map[recordKey][]chainRule
	// texts is how iptables-save shows desired rules, learned for plans
	// (see learn.go); noScratch is set once learning found that it cannot
	// make its scratch namespace.
	texts     map[textKey]learned
	noScratch bool
	// store keeps texts across restarts (TargetConfig.Texts);
	// storeLoaded is set once they were loaded from it.
	store       TextStore
	storeLoaded bool
	// peaks are the most entries each map held after an operation (see
	// compact).
	peaks struct{ rejected, prepared, texts int }
}

// compact gives back the room a burst of rules left in the maps once most
// of them are gone (shrink.Map). t.mu is held.
func (t *Target) compact() {
	t.rejected = shrink.Map(t.rejected, &t.peaks.rejected)
	t.prepared = shrink.Map(t.prepared, &t.peaks.prepared)
	t.texts = shrink.Map(t.texts, &t.peaks.texts)
}

var (
	_ reconciler.Target[*Rule]      = (*Target)(nil)
	_ reconciler.BatchTarget[*Rule] = (*Target)(nil)
)

var prefixRe = regexp.MustCompile(`^[A-Z0-9_][A-Z0-9_-]{0,15}$`)

// NewTarget returns a target for cfg. It fails (wrapping
// ErrInvalidConfig) without Rules, with a bad ChainPrefix, or with a NetNS
// that cannot name a namespace ("..").
func NewTarget(cfg TargetConfig) (*Target, error) {
	if cfg.ChainPrefix == "" {
		cfg.ChainPrefix = DefaultChainPrefix
	}
	if cfg.RestoreCommand == "" {
		cfg.RestoreCommand = DefaultRestoreCommand
	}
	if cfg.SaveCommand == "" {
		cfg.SaveCommand = DefaultSaveCommand
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.Rules == nil {
		return nil, fmt.Errorf("%w: Rules is required", ErrInvalidConfig)
	}
	if !prefixRe.MatchString(cfg.ChainPrefix) {
		return nil, fmt.Errorf("%w: ChainPrefix %q must match %s", ErrInvalidConfig, cfg.ChainPrefix, prefixRe)
	}
	ns, err := netnsutil.Resolve(cfg.NetNS)
	if err != nil {
		return nil, fmt.Errorf("%w: NetNS: %w", ErrInvalidConfig, err)
	}
	t := &Target{
		ns: ns, rules: cfg.Rules, prefix: cfg.ChainPrefix,
		restoreCmd: cfg.RestoreCommand, saveCmd: cfg.SaveCommand,
		noWatch: cfg.DisableWatch, checkEvery: cfg.CheckInterval,
		rejected: map[string]string{},
		prepared: map[ruleID]preparedRule{},
		written:  map[recordKey][]chainRule{},
		texts:    map[textKey]learned{},
		store:    cfg.Texts,
	}
	t.ownFilter.stats = &t.stats
	return t, nil
}

// ChainName returns the name of the target's chain for a built-in chain,
// e.g. "STEADYSTATE-INPUT".
func (t *Target) ChainName(builtin string) string { return t.prefix + "-" + builtin }

// Update applies one rule: UpdateBatch with one entry.
func (t *Target) Update(ctx context.Context, txn statedb.ReadTxn, obj *Rule) error {
	b := []reconciler.BatchEntry[*Rule]{{Object: obj}}
	t.UpdateBatch(ctx, txn, b)
	return b[0].Result
}

// Delete removes one rule: DeleteBatch with one entry.
func (t *Target) Delete(ctx context.Context, txn statedb.ReadTxn, obj *Rule) error {
	b := []reconciler.BatchEntry[*Rule]{{Object: obj}}
	t.DeleteBatch(ctx, txn, b)
	return b[0].Result
}

// UpdateBatch brings every chain that a rule of batch belongs to into its
// desired state (the rules of that chain in txn, with batch's versions)
// in one iptables-restore --noflush, creating and hooking the chain as
// needed. Rules already in place, in order and unchanged, are left alone.
//
// Results: an invalid rule gets a terminal error wrapping ErrInvalid. If
// iptables-restore rejects a rule, the error it reports for that line is
// pinned on the rule (terminal) and the batch is tried again without it,
// so that the other rules still get applied. A failure that cannot be
// pinned on a rule is every remaining entry's (non-terminal) error. txn
// must be a snapshot of the Rules table (the reconciler passes one);
// without it every entry fails.
func (t *Target) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*Rule]) {
	t.syncBatch(ctx, txn, batch, false)
}

// DeleteBatch removes the batch's rules by bringing their chains into
// their desired state (the rules of that chain in txn, without batch's),
// in one iptables-restore --noflush. A chain left without desired rules is
// unhooked and deleted. Errors are as for UpdateBatch.
func (t *Target) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*Rule]) {
	t.syncBatch(ctx, txn, batch, true)
}

// chainID names a desired chain: an iptables table and a built-in chain.
type chainID struct{ table, chain string }

func (t *Target) syncBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*Rule], deleted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.compact()
	if txn == nil {
		// Without the snapshot the other rules of the chains are unknown,
		// and rewriting the chains would drop them.
		for i := range batch {
			batch[i].Result = errNoSnapshot
		}
		return
	}
	// Read the real state while the desired state is worked out.
	tables := map[string]bool{}
	for i := range batch {
		if tbl := batch[i].Object.Table; builtinChains[tbl] != nil {
			tables[tbl] = true
		}
	}
	saved := t.saveAsync(ctx, tables)
	// The batch's objects override the snapshot: they are what the
	// reconciler asks for.
	entries := make(map[string]*batchItem, len(batch))
	items := make([]batchItem, len(batch))
	chains := map[chainID]int{} // number of entries per chain
	for i := range batch {
		e := &batch[i]
		e.Result = nil
		d, err := t.prepare(e.Object)
		if err != nil {
			if !deleted {
				e.Result = reconciler.Terminal(err)
			}
			continue // an invalid rule was never applied: nothing to delete
		}
		items[i] = batchItem{entry: e, d: d}
		entries[d.key] = &items[i]
		chains[chainID{e.Object.Table, e.Object.Chain}]++
		if deleted {
			delete(t.prepared, idOf(e.Object))
		}
	}
	if len(chains) == 0 {
		saved() // not needed after all
		return
	}
	plans := make([]*chainPlan, 0, len(chains))
	for c, n := range chains {
		plans = append(plans, &chainPlan{table: c.table, from: c.chain, owned: t.ChainName(c.chain), desired: t.desiredChain(txn, c, n, entries, deleted)})
	}
	state, err := saved()
	var culprits map[string]error
	if err == nil {
		culprits, err = t.apply(ctx, plans, state)
	}
	for key, cerr := range culprits {
		if it, ok := entries[key]; ok && !deleted {
			it.entry.Result = reconciler.Terminal(cerr)
		}
	}
	for key, it := range entries {
		switch {
		case it.entry.Result != nil:
		case err != nil:
			it.entry.Result = err
		default:
			delete(t.rejected, key)
		}
	}
}

// batchItem is an entry of the batch being applied.
type batchItem struct {
	entry *reconciler.BatchEntry[*Rule]
	d     desiredRule
	seen  bool // found in the snapshot
}

// desiredChain lists the desired rules of chain c in txn, with the n batch
// entries of c applied over them, in chain order. Invalid rules, and rules
// rejected before and not in the batch, are left out.
func (t *Target) desiredChain(txn statedb.ReadTxn, c chainID, n int, entries map[string]*batchItem, deleted bool) []desiredRule {
	var out []desiredRule
	for r := range t.rules.Prefix(txn, KeyIndex.Query(c.table+"/"+c.chain+"/")) {
		d, err := t.prepare(r)
		if err != nil {
			continue
		}
		if it, ok := entries[d.key]; ok {
			it.seen = true
			n--
			if !deleted {
				out = append(out, it.d)
			}
		} else if t.rejected[d.key] != d.args {
			out = append(out, d)
		}
	}
	if !deleted && n > 0 {
		// Entries that are not in the snapshot (it is older than them).
		for _, it := range entries {
			if !it.seen && it.entry.Object.Table == c.table && it.entry.Object.Chain == c.chain {
				out = append(out, it.d)
			}
		}
	}
	sortDesired(out)
	return out
}

// apply runs the plans in one iptables-restore, leaving out and
// reporting (in culprits, by key) rules that iptables-restore rejects.
// state is what iptables-save showed of the plans' tables. On success the
// record of each chain becomes what was written.
func (t *Target) apply(ctx context.Context, plans []*chainPlan, state map[string]*tableState) (culprits map[string]error, err error) {
	sort.Slice(plans, func(i, j int) bool {
		return plans[i].table < plans[j].table || plans[i].table == plans[j].table && plans[i].owned < plans[j].owned
	})
	t.learnUnrecorded(ctx, plans, state)
	for _, p := range plans {
		st := state[p.table]
		if st == nil {
			continue
		}
		if rec := t.learnedRecord(p.table, p.owned); len(rec) > 0 {
			p.actual = identify(rec, st.owned[p.owned])
		} else {
			p.actual = t.identifyLearned(p.table, p.owned, p.desired, st.owned[p.owned])
		}
	}
	culprits = map[string]error{}
	for {
		in := buildInput(plans, state)
		if in.cmds > 0 {
			msg, err := t.restore(ctx, in.buf, in.tables)
			if err != nil {
				key := in.rule(errorLine(msg))
				if key == "" || len(culprits) >= MaxCulpritsPerBatch {
					return culprits, err
				}
				// Leave the rejected rule out and try again; the failed
				// iptables-restore changed nothing.
				t.dropRejected(plans, key)
				culprits[key] = fmt.Errorf("iptables rejected rule %s: %s", key, msg)
				continue
			}
		}
		for _, p := range plans {
			if k := (recordKey{p.table, p.owned}); len(p.desired) == 0 {
				delete(t.written, k)
			} else {
				t.written[k] = p.result
			}
		}
		t.saveTexts(plans)
		return culprits, nil
	}
}

// dropRejected removes the rule key from the plans and remembers it as
// rejected.
func (t *Target) dropRejected(plans []*chainPlan, key string) {
	for _, p := range plans {
		for i, d := range p.desired {
			if d.key == key {
				t.rejected[key] = d.args
				p.desired = append(p.desired[:i:i], p.desired[i+1:]...)
				return
			}
		}
	}
}

// buildInput renders the plans as iptables-restore input, one section per
// table.
func buildInput(plans []*chainPlan, state map[string]*tableState) *restoreInput {
	size, lines := 0, 0
	for _, p := range plans {
		for _, d := range p.desired {
			size += len(d.args) + len(p.owned) + 16
		}
		lines += len(p.desired) + 8
	}
	in := &restoreInput{buf: make([]byte, 0, size), ruleAt: make([]string, 0, lines)}
	for i := 0; i < len(plans); {
		j := i
		for j < len(plans) && plans[j].table == plans[i].table {
			j++
		}
		st := state[plans[i].table]
		in.add("", "*", plans[i].table)
		in.tables++
		for _, p := range plans[i:j] {
			p.declare(in, st)
		}
		for _, p := range plans[i:j] {
			p.commands(in, st)
		}
		in.add("", "COMMIT")
		i = j
	}
	return in
}

// Prune brings every chain of the target that exists into its desired
// state (the rules of desired in that chain): rules that are not desired,
// duplicates, strays and rules changed behind the target's back are
// deleted, and missing rules are put back, all in one iptables-restore.
// A new target (after a restart) recognizes the rules of a chain by the
// texts it learns for them (see learnUnrecorded); where it cannot learn,
// the chain is rewritten whole in that batch. Chains without desired
// rules are unhooked and deleted. Chains that do not exist are left to the
// Updates of a refresh (the reconciler's RefreshInterval). Rules outside its
// chains are never touched, except its own hooks. Invalid rules and rules
// iptables rejected before are left out; a rule iptables rejects now is
// left out too (its Update reports it). Errors are iptables-save's and
// iptables-restore's.
func (t *Target) Prune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Rule, statedb.Revision]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.compact()
	out, err := t.run(ctx, nil, t.saveCmd)
	if err != nil {
		return err
	}
	state, err := parseSave(out, t.prefix)
	if err != nil {
		return err
	}
	want := map[recordKey][]desiredRule{}
	keys := map[string]bool{}
	keepTexts := map[textKey]bool{}
	for r := range desired {
		d, err := t.prepare(r)
		keys[d.key] = true
		if err != nil || t.rejected[d.key] == d.args {
			continue
		}
		k := recordKey{r.Table, t.ChainName(r.Chain)}
		want[k] = append(want[k], d)
		keepTexts[textKey{k.table, k.owned, d.args}] = true
	}
	t.loadTexts()
	t.forgetTexts(keepTexts) // what is no longer desired
	for id, p := range t.prepared {
		if !keys[p.d.key] {
			delete(t.prepared, id)
		}
	}
	for key := range t.rejected {
		if !keys[key] {
			delete(t.rejected, key)
		}
	}
	var plans []*chainPlan
	for tbl, st := range state {
		owned := map[string]bool{}
		for c := range st.chains {
			if strings.HasPrefix(c, t.prefix+"-") {
				owned[c] = true
			}
		}
		for hk := range st.hooks {
			owned[hk.To] = true
		}
		for c := range owned {
			d := want[recordKey{tbl, c}]
			sortDesired(d)
			plans = append(plans, &chainPlan{table: tbl, from: strings.TrimPrefix(c, t.prefix+"-"), owned: c, desired: d})
		}
	}
	for k := range t.written {
		if st := state[k.table]; st == nil || !st.chains[k.owned] {
			delete(t.written, k)
		}
	}
	_, err = t.apply(ctx, plans, state)
	return err
}
