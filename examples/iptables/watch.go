package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
)

// The target as a reconciler.DriftTarget: it reports the chains whose
// rules may have changed behind its back, as the key prefix of their rules
// ("filter/INPUT/"), so that the reconciler checks them (one iptables-save
// per table, see PlanUpdateBatch) and repairs what differs.
//
// On the nf_tables backend (iptables-nft, Debian's default: `iptables
// --version` says "nf_tables"), iptables writes nf_tables, which notifies
// every change. The watch reads those notifications in the target's
// namespace and reports:
//
//   - a change of an owned chain ("<prefix>-INPUT"), or of a rule in it;
//   - a change of a rule of a built-in chain that jumps to an owned chain
//     (a hook), or the deletion of a built-in chain;
//   - a table deleted (`nft flush ruleset`): every chain of it.
//
// Everything else (foreign rules and chains, sets, other families) is
// decoded and dropped. The changes the target makes itself (its
// iptables-restore processes) are not heard (ownfilter.go): a restore of
// one table runs with the socket out of the notification group, and the
// ruleset's generation tells whether anything else changed meanwhile
// (then every object is reported); one of several tables is dropped in
// the kernel by the socket's filter, known by the process ID nf_tables
// gives each generation of changes, else after decoding. When
// notifications are lost (the socket's buffer overflowed, or it could
// not rejoin the group), the watch subscribes again and reports every
// object.
//
// On the legacy backend (iptables-legacy), which notifies nothing, the
// watch reads every table with one iptables-save every
// TargetConfig.CheckInterval (DefaultCheckInterval) and reports the chains
// whose content (their rules, hooks and existence) changed since the last
// read.
//
// In either case, when the namespace goes away, the watch fails (the
// reconciler reports it: health Degraded) after reporting every object,
// whose checks then fail, saying why, until it is back.

// DefaultCheckInterval is how often, on the legacy backend, the target
// reads its chains to see whether they changed (TargetConfig.CheckInterval).
const DefaultCheckInterval = 10 * time.Second

// namespaceCheckInterval is how often the nf_tables watch checks that the
// target's namespace is still there (one stat of its file).
const namespaceCheckInterval = time.Second

// eventBuffer is the receive buffer of the nf_tables notification socket.
const eventBuffer = 4 << 20

// ownWindow is how long a process ID of the target's iptables-restore
// stays known as the target's own, for its notifications to be dropped:
// long enough for a slow restore on a loaded machine, short enough that
// the ID is not another process's by then.
const ownWindow = time.Minute

var _ reconciler.DriftTarget[*Rule] = (*Target)(nil)

// WatchStats counts what the target's watch saw since the target was made.
type WatchStats struct {
	// Generations is how many nf_tables generations (transactions) were
	// read; Own how many of them were the target's own.
	Generations, Own uint64
	// Generation is the ID of the last generation read (and handled).
	Generation uint32
	// OwnChanges is how many changes of the target's own generations
	// reached the watch: its socket's filter drops them in the kernel
	// (ownfilter.go), unless iptables-restore's socket was not given its
	// process ID as port ID.
	OwnChanges uint64
	// Quiet is how many of the target's restores ran with the watch's
	// socket out of nf_tables' group (ownfilter.go); Unsure how many of
	// those the generation could not tell free of another program's
	// change, after each of which every object was reported.
	Quiet, Unsure uint64
	// Reports is how many chains (or tables) were reported.
	Reports uint64
	// Overflows is how many times notifications were lost and everything
	// was reported.
	Overflows uint64
	// Checks and CheckTime are the legacy backend's reads, and their total
	// time.
	Checks    uint64
	CheckTime time.Duration
}

type watchStats struct {
	generation                                                              atomic.Uint32
	generations, own, ownChanges, quiet, unsure, reports, overflows, checks atomic.Uint64
	checkNanos                                                              atomic.Int64
}

// WatchStats returns the counters of the target's watch.
func (t *Target) WatchStats() WatchStats {
	s := &t.stats
	return WatchStats{
		Generations: s.generations.Load(), Own: s.own.Load(), Generation: s.generation.Load(), OwnChanges: s.ownChanges.Load(),
		Quiet: s.quiet.Load(), Unsure: s.unsure.Load(), Reports: s.reports.Load(),
		Overflows: s.overflows.Load(), Checks: s.checks.Load(), CheckTime: time.Duration(s.checkNanos.Load()),
	}
}

// ownPIDs are the process IDs of the target's recent iptables-restore
// runs.
type ownPIDs struct {
	mu   sync.Mutex
	pids map[uint32]time.Time // when the process started
}

func (o *ownPIDs) add(pid int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if o.pids == nil {
		o.pids = map[uint32]time.Time{}
	}
	maps.DeleteFunc(o.pids, func(_ uint32, at time.Time) bool { return now.Sub(at) > ownWindow })
	o.pids[uint32(pid)] = now
}

func (o *ownPIDs) has(pid uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.pids[pid]
	return ok && time.Since(at) <= ownWindow
}

// WatchDrift implements reconciler.DriftTarget (see the top of this file),
// unless TargetConfig.DisableWatch: then it waits for ctx and reports
// nothing. It returns nil when ctx ends; an error when it cannot watch:
// the namespace cannot be entered or is gone, the notification socket
// fails, iptables-save fails on the legacy backend.
func (t *Target) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	if t.noWatch {
		<-ctx.Done()
		return nil
	}
	nft, err := t.nfTables(ctx)
	if err != nil {
		return err
	}
	if !nft {
		return t.watchLegacy(ctx, drift)
	}
	for {
		err := t.watchNFT(ctx, drift)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errOverflow):
			t.stats.overflows.Add(1)
			continue // subscribe again, and report everything
		case errors.Is(err, errRejoin):
			continue // the same
		case errors.Is(err, errNamespaceGone):
			drift.ChangedAll() // their checks say that it is gone
		}
		return err
	}
}

var (
	errOverflow      = errors.New("nf_tables notifications lost: the socket's buffer overflowed")
	errRejoin        = errors.New("nf_tables notifications lost: the socket could not rejoin their group")
	errNamespaceGone = errors.New("is gone")
)

// nfTables reports whether the save command writes nf_tables (see
// writesNFT). It asks once.
func (t *Target) nfTables(ctx context.Context) (bool, error) {
	t.backendOnce.Do(func() { t.nft, t.backendErr = writesNFT(ctx, t.saveCmd) })
	return t.nft, t.backendErr
}

// restoreWritesNFT reports whether the restore command writes nf_tables
// too (it may be set apart from the save command; an error says no). Only
// then may the watch leave the group while it runs. It asks once.
func (t *Target) restoreWritesNFT(ctx context.Context) bool {
	t.restoreOnce.Do(func() { t.restoreNFT, _ = writesNFT(ctx, t.restoreCmd) })
	return t.restoreNFT
}

// writesNFT reports whether an iptables command writes nf_tables: its
// multi-call binary's name says so (backendOf), else "(nf_tables)" in its
// --version.
func writesNFT(ctx context.Context, cmd string) (bool, error) {
	if nft, known := backendOf(cmd); known {
		return nft, nil
	}
	out, err := runCommand(ctx, nil, cmd, "--version")
	if err != nil {
		return false, fmt.Errorf("iptables target: %s --version: %w", cmd, err)
	}
	return bytes.Contains(out, []byte("nf_tables")), nil
}

// backendOf tells the backend of an iptables command from the binary it
// resolves to: iptables 1.8 builds one multi-call binary per backend,
// xtables-nft-multi and xtables-legacy-multi, and names every command of
// that backend a link to it (Debian's alternatives add a link or two in
// between). known is false for any other binary (an older iptables, a
// wrapper): ask it then. (The drift watch asks as it starts, with the
// agent: the command run took a core from a start's first list for 4
// ms.)
func backendOf(cmd string) (nft, known bool) {
	path, err := exec.LookPath(cmd)
	if err != nil {
		return false, false
	}
	if path, err = filepath.EvalSymlinks(path); err != nil {
		return false, false
	}
	switch filepath.Base(path) {
	case "xtables-nft-multi":
		return true, true
	case "xtables-legacy-multi":
		return false, true
	}
	return false, false
}

// family is the nf_tables family of the target's tables.
func (t *Target) family() nftables.TableFamily {
	if strings.HasPrefix(filepath.Base(t.saveCmd), "ip6tables") {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// watchNFT reads the nf_tables notifications of the target's namespace
// until ctx ends (nil), the socket fails (errOverflow, or its error), or
// the namespace goes away (errNamespaceGone).
func (t *Target) watchNFT(ctx context.Context, drift reconciler.Drift) error {
	var opts []nftables.ConnOption
	var id nsIdentity
	nsFD := 0 // the process's own
	if t.ns != "" {
		f, err := os.Open(string(t.ns))
		if err != nil {
			return fmt.Errorf("iptables target: network namespace %s: %w", t.ns, err)
		}
		defer f.Close()
		if id, err = nsIdentityOf(string(t.ns)); err != nil {
			return fmt.Errorf("iptables target: network namespace %s: %w", t.ns, err)
		}
		nsFD = int(f.Fd())
		opts = append(opts, nftables.WithNetNSFd(nsFD))
	}
	// The target's own restores run with the socket out of the group, or
	// filtered (ownfilter.go). Without a generation socket there are no
	// quiet windows, only the filter.
	hooks := watchHooks{lost: drift.ChangedAll}
	broken := make(chan error, 1)
	hooks.broken = func(err error) {
		select {
		case broken <- err:
		default:
		}
	}
	if t.restoreWritesNFT(ctx) {
		if gens, err := dialGen(nsFD); err == nil {
			defer gens.Close()
			hooks.gens = gens
		}
	}
	opts = append(opts, nftables.WithSockOptions(setReadBuffer(t.bufferSize()), func(c *netlink.Conn) error {
		t.ownFilter.attach(c, hooks)
		return nil
	}))
	defer t.ownFilter.attach(nil, watchHooks{})
	conn, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("iptables target: nf_tables socket in network namespace %q: %w", t.ns, err)
	}
	mon := nftables.NewMonitor()
	events, err := conn.AddGenerationalMonitor(mon)
	if err != nil {
		return fmt.Errorf("iptables target: watching nf_tables in network namespace %q: %w", t.ns, err)
	}
	defer func() {
		mon.Close()
		for range events { // until the monitor's goroutine is done
		}
	}()
	// The filter lets go of the socket before it closes.
	defer t.ownFilter.attach(nil, watchHooks{})
	drift.ChangedAll() // what changed before is unknown
	if t.subscribed != nil {
		t.subscribed()
	}
	var check <-chan time.Time
	if t.ns != "" {
		tick := time.NewTicker(namespaceCheckInterval)
		defer tick.Stop()
		check = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case gen, ok := <-events:
			if !ok {
				return errors.New("iptables target: the nf_tables notification socket closed")
			}
			if err := t.generation(gen, drift); err != nil {
				return err
			}
		case err := <-broken:
			return fmt.Errorf("%w: %w", errRejoin, err)
		case <-check:
			if now, err := nsIdentityOf(string(t.ns)); err != nil || now != id {
				return fmt.Errorf("iptables target: network namespace %s %w (deleted, or replaced by another of that name)", t.ns, errNamespaceGone)
			}
		}
	}
}

func (t *Target) bufferSize() int {
	if t.eventBuffer > 0 {
		return t.eventBuffer
	}
	return eventBuffer
}

// setReadBuffer sets the socket's receive buffer to n bytes, past
// rmem_max where allowed (CAP_NET_ADMIN).
func setReadBuffer(n int) nftables.SockOption {
	return func(c *netlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return c.SetReadBuffer(n)
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
		}); err != nil || serr != nil {
			return c.SetReadBuffer(n)
		}
		return nil
	}
}

// generation reports the chains one nf_tables generation changed, unless
// it is the target's own. An out-of-band event ends the watch: its error
// (errOverflow for ENOBUFS).
func (t *Target) generation(gen *nftables.MonitorEvents, drift reconciler.Drift) error {
	if by := gen.GeneratedBy; by != nil && by.Type == nftables.MonitorEventTypeOOB {
		if errors.Is(by.Error, unix.ENOBUFS) || (by.Error != nil && strings.Contains(by.Error.Error(), unix.ENOBUFS.Error())) {
			return errOverflow
		}
		return fmt.Errorf("iptables target: reading nf_tables notifications: %w", by.Error)
	}
	// Counted once handled: a test that sees the count sees the reports.
	defer t.stats.generations.Add(1)
	if by := gen.GeneratedBy; by != nil {
		g, ok := by.Data.(*nftables.GenMsg)
		if ok {
			defer t.stats.generation.Store(g.ID)
			if t.heard != nil {
				t.heard(g.ID)
			}
		}
		if ok && t.own.has(g.ProcPID) {
			t.stats.own.Add(1)
			t.stats.ownChanges.Add(uint64(len(gen.Changes)))
			return nil
		}
	}
	prefixes := map[string]bool{}
	for _, ev := range gen.Changes {
		for _, p := range t.affected(ev) {
			prefixes[p] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(prefixes)) {
		t.stats.reports.Add(1)
		drift.ChangedPrefix(index.String(p))
	}
	return nil
}

// affected returns the key prefixes of the desired rules that a change may
// affect: "table/" for a whole table, "table/BUILTIN/" for a chain.
func (t *Target) affected(ev *nftables.MonitorEvent) []string {
	fam := t.family()
	owned := t.prefix + "-"
	// A table or a built-in chain that is created holds nothing of the
	// target's yet: only their deletion matters.
	switch ev.Type {
	case nftables.MonitorEventTypeDelTable:
		if tb, ok := ev.Data.(*nftables.Table); ok && tb.Family == fam && builtinChains[tb.Name] != nil {
			return []string{tb.Name + "/"}
		}
	case nftables.MonitorEventTypeNewChain, nftables.MonitorEventTypeDelChain:
		c, ok := ev.Data.(*nftables.Chain)
		if !ok || c.Table == nil || c.Table.Family != fam {
			return nil
		}
		if !strings.HasPrefix(c.Name, owned) && ev.Type == nftables.MonitorEventTypeNewChain {
			return nil
		}
		if from, ok := t.builtinFor(c.Table.Name, c.Name); ok {
			return []string{c.Table.Name + "/" + from + "/"}
		}
	case nftables.MonitorEventTypeNewRule, nftables.MonitorEventTypeDelRule:
		r, ok := ev.Data.(*nftables.Rule)
		if !ok || r == nil || r.Table == nil || r.Chain == nil || r.Table.Family != fam {
			return nil
		}
		tbl := r.Table.Name
		if strings.HasPrefix(r.Chain.Name, owned) {
			if from, ok := t.builtinFor(tbl, r.Chain.Name); ok {
				return []string{tbl + "/" + from + "/"}
			}
			return nil
		}
		if !slices.Contains(builtinChains[tbl], r.Chain.Name) {
			return nil // a foreign chain
		}
		if ev.Error != nil {
			// Not decoded: it may be a hook.
			return []string{tbl + "/" + r.Chain.Name + "/"}
		}
		for _, e := range r.Exprs {
			if v, ok := e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) && strings.HasPrefix(v.Chain, owned) {
				if from, ok := t.builtinFor(tbl, v.Chain); ok {
					return []string{tbl + "/" + from + "/"}
				}
			}
		}
	}
	return nil
}

// builtinFor returns the built-in chain whose rules go into chain: chain
// itself if it is built in, or the one an owned chain is named for.
func (t *Target) builtinFor(table, chain string) (string, bool) {
	chains := builtinChains[table]
	if slices.Contains(chains, chain) {
		return chain, true
	}
	if from, ok := strings.CutPrefix(chain, t.prefix+"-"); ok && slices.Contains(chains, from) {
		return from, true
	}
	return "", false
}

// watchLegacy reads the tables every CheckInterval and reports the owned
// chains whose content changed, until ctx ends (nil) or iptables-save
// fails.
func (t *Target) watchLegacy(ctx context.Context, drift reconciler.Drift) error {
	if t.checkEvery < 0 {
		<-ctx.Done()
		return nil
	}
	last, err := t.fingerprints(ctx)
	if err != nil {
		return err
	}
	drift.ChangedAll() // what changed before is unknown
	tick := time.NewTicker(t.checkEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := t.fingerprints(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			drift.ChangedAll()
			return err
		}
		for _, c := range slices.SortedFunc(maps.Keys(unionKeys(last, now)), func(a, b chainID) int {
			return strings.Compare(a.table+"/"+a.chain, b.table+"/"+b.chain)
		}) {
			if last[c] != now[c] {
				t.stats.reports.Add(1)
				drift.ChangedPrefix(index.String(c.table + "/" + c.chain + "/"))
			}
		}
		last = now
		t.stats.checks.Add(1) // once its reports are made
	}
}

func unionKeys(a, b map[chainID]uint64) map[chainID]bool {
	out := make(map[chainID]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// fingerprints reads every table with one iptables-save and returns, per
// built-in chain that has an owned chain or a hook into one, a hash of the
// owned chain's rules and the hooks into it.
func (t *Target) fingerprints(ctx context.Context) (map[chainID]uint64, error) {
	start := time.Now()
	out, err := t.run(ctx, nil, t.saveCmd)
	if err != nil {
		return nil, fmt.Errorf("iptables target: checking the chains: %w", err)
	}
	state, err := parseSave(out, t.prefix)
	if err != nil {
		return nil, err
	}
	prints := map[chainID]uint64{}
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
			from, ok := t.builtinFor(tbl, c)
			if !ok {
				continue
			}
			h := fnv.New64a()
			fmt.Fprintf(h, "%v\n", st.chains[c])
			for _, l := range st.owned[c] {
				h.Write([]byte(l))
				h.Write([]byte{'\n'})
			}
			for _, hk := range sortedHooks(st) {
				if hk.To == c {
					fmt.Fprintf(h, "hook %s %d\n", hk.From, st.hooks[hk])
				}
			}
			prints[chainID{tbl, from}] = h.Sum64()
		}
	}
	t.stats.checkNanos.Add(int64(time.Since(start)))
	return prints, nil
}

// nsIdentity tells namespaces apart: the device and inode of their file.
type nsIdentity struct{ dev, ino uint64 }

func nsIdentityOf(path string) (nsIdentity, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsIdentity{}, err
	}
	return nsIdentity{dev: st.Dev, ino: st.Ino}, nil
}
