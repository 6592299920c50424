package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/steadystate/steadystate/hive/cell"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/sysctl"
)

// The agent's durable record (--state-dir): a bbolt database,
// STATEDIR/agent.db, that survives restarts and crashes, with
//
//	sysctl-originals   name -> the value found before the agent first
//	                   changed it (sysctl.OriginalStore): saved before the
//	                   write, dropped after the restore, so that a
//	                   restarted agent restores what an earlier run changed
//	iptables-texts     TABLE NUL CHAIN NUL SPEC -> how iptables-save shows
//	                   that rule (iptables.TextStore), so that a restarted
//	                   agent recognizes the rules in place without learning
//	                   them again: a cache, dropped with the rule
//	applied/TABLE      primary key -> the object (JSON) as last applied by
//	                   that table's target, dropped when the target deleted
//	                   it (see recordTarget): what the agent changed, for a
//	                   restarted agent's prune to remove what is no longer
//	                   desired. Not kept for a target whose objects the
//	                   kernel marks (routes: see kernelMarked); a bucket an
//	                   earlier version kept for one is dropped by its
//	                   first prune
//
// Every write is one bbolt transaction, synced before it returns. The
// database is locked while open (flock); a second agent on the same state
// directory waits stateOpenTimeout and fails naming it. It has started
// meanwhile (its status API up, its desired state loaded; in fleet mode its
// node joined), but it changes nothing in the kernel: its targets wait for
// the record (see stateRecord), and it stops with the error.
//
// The default directory is one per managed namespace: STATEROOT/NS with
// NS as for the socket ("host", "netns-NAME"); STATEROOT is
// /var/lib/steadystate/agent for root, else $XDG_STATE_HOME/steadystate-agent
// or ~/.local/state/steadystate-agent. A sandbox's record ends with it: it
// is RUNDIR/sandbox-PID (see leftovers.go), removed at stop and swept when
// the PID is dead.

// stateOpenTimeout is how long opening the record waits for another agent
// to let go of it.
const stateOpenTimeout = 2 * time.Second

var bucketOriginals = []byte("sysctl-originals")

// errStateBusy is the error of a state directory another agent holds.
var errStateBusy = errors.New("the state directory is in use by another agent")

// stateRoot is STATEROOT above.
func stateRoot() string {
	if os.Geteuid() == 0 && os.Getenv(envSandboxed) == "" {
		return "/var/lib/steadystate/agent"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "steadystate-agent")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "steadystate-agent")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("steadystate-agent-state-%d", os.Getuid()))
}

// defaultStateDir is the default --state-dir for --netns netnsFlag in the
// process pid.
func defaultStateDir(netnsFlag string, pid int) string {
	if netnsFlag == netnsSandbox {
		return filepath.Join(runDir(), sandboxStatePrefix+strconv.Itoa(pid))
	}
	return filepath.Join(stateRoot(), nsFileName(netnsFlag))
}

// sandboxStatePrefix starts the name of a sandbox's state directory.
const sandboxStatePrefix = "sandbox-"

// isSandboxStateDir reports whether dir is named as a sandbox's default
// state directory (sandbox-PID).
func isSandboxStateDir(dir string) bool {
	pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), sandboxStatePrefix))
	return strings.HasPrefix(filepath.Base(dir), sandboxStatePrefix) && err == nil && pid > 0
}

// stateRecord is the record. It is opened by the hive's start (so that
// `agent run cells` or a failing flag never touch it) and closed at stop;
// a sandbox's directory is removed then.
//
// The open runs beside the rest of the start, not in its way: a new
// record is created and synced (1-3 ms of a cold start's critical path),
// and a record still held by an agent that is stopping is waited for (up
// to stateOpenTimeout). Every use waits for it: the record's reads and
// writes (view, update), and every operation of a target on the kernel
// (recordTarget's, through ready), so that an agent whose record cannot
// be opened applies nothing; it stops with the open's error.
type stateRecord struct {
	db       *bolt.DB
	dir      string
	readOnly bool // opened by agent diff: writes fail with errReadOnly
	// opened is closed once the open begun at start is done, db set or
	// openErr; started says that it began (a record never started, or
	// opened otherwise, as by openState, has none to wait for).
	opened  chan struct{}
	started atomic.Bool
	openErr error
}

// newStateRecord returns the record of cfg's namespace, to be opened at
// start.
func newStateRecord(cfg AgentConfig, lc cell.Lifecycle, log *slog.Logger, shutdown cell.Shutdowner) *stateRecord {
	s := &stateRecord{dir: cfg.StateDirPath(), opened: make(chan struct{})}
	// A sandbox's own directory (by default, or handed down by the
	// unprivileged parent) goes with it; one the user named stays.
	sandbox := cfg.NetNS == netnsSandbox && isSandboxStateDir(s.dir)
	lc.Append(cell.Hook{
		OnStart: func(context.Context) error {
			s.started.Store(true)
			go func() {
				defer close(s.opened)
				opened, err := openState(s.dir)
				if err != nil {
					s.openErr = err
					log.Error("The state record cannot be opened: stopping, nothing applied", "dir", s.dir, "error", err)
					shutdown.Shutdown(cell.ShutdownWithError(err))
					return
				}
				s.db = opened.db
				log.Info("State record opened", "dir", s.dir)
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			select {
			case <-s.opened:
			case <-ctx.Done():
				return fmt.Errorf("--state-dir %s: the record was still opening at stop: %w", s.dir, ctx.Err())
			}
			if s.db == nil {
				return nil // the open failed: its error stopped the agent
			}
			err := s.db.Close()
			if sandbox {
				err = errors.Join(err, os.RemoveAll(s.dir))
			}
			return err
		},
	})
	return s
}

// stateMmapSize is the address space the record maps at once: a record
// that grows (a first start writes 60,000 objects in their first rounds)
// is mapped again at each doubling, a copy of its page tables and faults
// again on every page, unless the mapping already covers it. Only address
// space: pages are resident as they are read or written.
const stateMmapSize = 256 << 20

// openState opens (creating) dir/agent.db.
func openState(dir string) (*stateRecord, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--state-dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "agent.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: stateOpenTimeout, InitialMmapSize: stateMmapSize})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("--state-dir %s: %w (%s stayed locked for %v)", dir, errStateBusy, path, stateOpenTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: opening %s: %w", dir, path, err)
	}
	return &stateRecord{db: db, dir: dir}, nil
}

// openStateReadOnly opens the record in dir for reading only (agent diff),
// waiting at most timeout for an agent that holds it: errStateBusy then.
// A directory without a record is errNoState.
func openStateReadOnly(dir string, timeout time.Duration) (*stateRecord, error) {
	path := filepath.Join(dir, "agent.db")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %s", errNoState, path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("--state-dir %s: %w (an agent holds %s)", dir, errStateBusy, path)
	}
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: opening %s: %w", dir, path, err)
	}
	return &stateRecord{db: db, dir: dir, readOnly: true}, nil
}

// errNoState says that a directory holds no record (no agent ran there).
var errNoState = errors.New("no durable record")

// errReadOnly is the error of a write to a record opened read-only.
var errReadOnly = errors.New("the record is open read-only")

// errStateNotOpen is the error of a record used before the hive started.
var errStateNotOpen = errors.New("the state record is not open yet")

// ready waits for the open begun at start, if any, and returns its error
// (or ctx's, if ctx ends first).
func (s *stateRecord) ready(ctx context.Context) error {
	if !s.started.Load() {
		return nil
	}
	select {
	case <-s.opened:
		return s.openErr
	case <-ctx.Done():
		return fmt.Errorf("waiting for the state record in %s to open: %w", s.dir, ctx.Err())
	}
}

// update runs fn in a read-write transaction, committed and synced.
func (s *stateRecord) update(fn func(*bolt.Tx) error) error {
	if err := s.ready(context.Background()); err != nil {
		return err
	}
	if s.db == nil {
		return fmt.Errorf("%s: %w", s.dir, errStateNotOpen)
	}
	if s.readOnly {
		return fmt.Errorf("%s: %w", s.dir, errReadOnly)
	}
	return s.db.Update(fn)
}

// view runs fn in a read-only transaction.
func (s *stateRecord) view(fn func(*bolt.Tx) error) error {
	if err := s.ready(context.Background()); err != nil {
		return err
	}
	if s.db == nil {
		return fmt.Errorf("%s: %w", s.dir, errStateNotOpen)
	}
	return s.db.View(fn)
}

var _ sysctl.OriginalStore = (*stateRecord)(nil)

// LoadOriginals implements sysctl.OriginalStore.
func (s *stateRecord) LoadOriginals() (map[string]string, error) {
	m := map[string]string{}
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOriginals)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			m[string(k)] = string(v)
			return nil
		})
	})
	return m, err
}

// SaveOriginal implements sysctl.OriginalStore.
func (s *stateRecord) SaveOriginal(name, value string) error {
	return s.put(bucketOriginals, []byte(name), []byte(value))
}

// ForgetOriginal implements sysctl.OriginalStore.
func (s *stateRecord) ForgetOriginal(name string) error {
	return s.delete(bucketOriginals, []byte(name))
}

var (
	_              iptables.TextStore = (*stateRecord)(nil)
	bucketIPTTexts                    = []byte("iptables-texts")
)

// LoadTexts implements iptables.TextStore.
func (s *stateRecord) LoadTexts() ([]iptables.RuleText, error) {
	var out []iptables.RuleText
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketIPTTexts)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if f := strings.SplitN(string(k), "\x00", 3); len(f) == 3 {
				out = append(out, iptables.RuleText{Table: f[0], Chain: f[1], Spec: f[2], Text: string(v)})
			}
			return nil
		})
	})
	return out, err
}

// SaveTexts implements iptables.TextStore.
func (s *stateRecord) SaveTexts(put, forget []iptables.RuleText) error {
	key := func(rt iptables.RuleText) []byte { return []byte(rt.Table + "\x00" + rt.Chain + "\x00" + rt.Spec) }
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketIPTTexts)
		if err != nil {
			return err
		}
		for _, rt := range forget {
			if err := b.Delete(key(rt)); err != nil {
				return err
			}
		}
		for _, rt := range put {
			if err := b.Put(key(rt), []byte(rt.Text)); err != nil {
				return err
			}
		}
		return nil
	})
}

func appliedBucket(table string) []byte { return []byte("applied/" + table) }

// dropBucket deletes bucket, if the record has it.
func (s *stateRecord) dropBucket(bucket []byte) error {
	if err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucket) == nil {
			bucket = nil
		}
		return nil
	}); err != nil || bucket == nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucket); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
		return nil
	})
}

// put sets key in bucket, creating the bucket.
func (s *stateRecord) put(bucket, key, value []byte) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.Put(key, value)
	})
}

// delete removes key from bucket; a missing one is not an error.
func (s *stateRecord) delete(bucket, key []byte) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.Delete(key)
	})
}

// applied returns the objects recorded as applied in table, by key.
func (s *stateRecord) applied(table string) (map[string][]byte, error) {
	return s.appliedExcept(table, nil)
}

// appliedExcept returns the objects recorded as applied in table whose
// keys are not in except, by key: a prune's leftovers, copied out of the
// record without copying every object it holds.
func (s *stateRecord) appliedExcept(table string, except map[string]bool) (map[string][]byte, error) {
	m := map[string][]byte{}
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(appliedBucket(table))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if !except[string(k)] {
				m[string(k)] = append([]byte(nil), v...)
			}
			return nil
		})
	})
	return m, err
}
