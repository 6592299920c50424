package reconciler

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// The config tests look inside the reconciler New returns, so they are
// in-package tests with an object and a target of their own.

type cfgObj struct {
	ID     string
	Status Status
}

type cfgTarget struct{}

func (cfgTarget) Update(context.Context, statedb.ReadTxn, *cfgObj) error { return nil }
func (cfgTarget) Delete(context.Context, statedb.ReadTxn, *cfgObj) error { return nil }
func (cfgTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*cfgObj, statedb.Revision]) error {
	return nil
}

// cfgTable returns a db with an empty table of cfgObj.
func cfgTable(t *testing.T) (*statedb.DB, statedb.RWTable[*cfgObj]) {
	t.Helper()
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", statedb.Index[*cfgObj, string]{
		Name:       "id",
		FromObject: func(o *cfgObj) index.KeySet { return index.NewKeySet(index.String(o.ID)) },
		FromKey:    index.String,
		Unique:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// validConfig is a valid config for tbl, with retries after 1-10ms.
func validConfig(tbl statedb.RWTable[*cfgObj]) Config[*cfgObj] {
	return Config[*cfgObj]{
		Name:            "test",
		Table:           tbl,
		Target:          cfgTarget{},
		GetObjectStatus: func(o *cfgObj) Status { return o.Status },
		SetObjectStatus: func(o *cfgObj, s Status) *cfgObj { o.Status = s; return o },
		CloneObject:     func(o *cfgObj) *cfgObj { c := *o; return &c },
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: 10 * time.Millisecond,
	}
}

// New rejects every bad config with ErrInvalidConfig and says what is
// wrong.
func TestNewInvalidConfig(t *testing.T) {
	db, tbl := cfgTable(t)
	tests := []struct {
		name   string
		change func(*Config[*cfgObj])
		want   string // in the error
	}{
		{"no name", func(c *Config[*cfgObj]) { c.Name = "" }, "Name"},
		{"upper-case name", func(c *Config[*cfgObj]) { c.Name = "Routes" }, "Name"},
		{"name with a space", func(c *Config[*cfgObj]) { c.Name = "my routes" }, "Name"},
		{"name starting with a digit", func(c *Config[*cfgObj]) { c.Name = "1routes" }, "Name"},
		{"name too long", func(c *Config[*cfgObj]) { c.Name = "r" + strings.Repeat("x", 64) }, "Name"},
		{"no table", func(c *Config[*cfgObj]) { c.Table = nil }, "Table"},
		{"no target", func(c *Config[*cfgObj]) { c.Target = nil }, "Target"},
		{"no GetObjectStatus", func(c *Config[*cfgObj]) { c.GetObjectStatus = nil }, "GetObjectStatus"},
		{"no SetObjectStatus", func(c *Config[*cfgObj]) { c.SetObjectStatus = nil }, "SetObjectStatus"},
		{"no CloneObject", func(c *Config[*cfgObj]) { c.CloneObject = nil }, "CloneObject"},
		{"negative interval", func(c *Config[*cfgObj]) { c.FullReconciliationInterval = -1 }, "FullReconciliationInterval"},
		{"negative backoff", func(c *Config[*cfgObj]) { c.RetryBackoffMin = -1 }, "backoff"},
		{"max below min", func(c *Config[*cfgObj]) { c.RetryBackoffMin, c.RetryBackoffMax = time.Second, time.Millisecond }, "RetryBackoffMax"},
		{"negative round size", func(c *Config[*cfgObj]) { c.IncrementalRoundSize = -1 }, "IncrementalRoundSize"},
		{"negative timeout", func(c *Config[*cfgObj]) { c.OperationTimeout = -1 }, "OperationTimeout"},
		{"negative refresh interval", func(c *Config[*cfgObj]) { c.RefreshInterval = -1 }, "RefreshInterval"},
		{"negative refresh rate", func(c *Config[*cfgObj]) { c.RefreshRate = -1 }, "RefreshRate"},
		{"negative workers", func(c *Config[*cfgObj]) { c.Workers = -1 }, "Workers"},
		{"negative min round interval", func(c *Config[*cfgObj]) { c.MinRoundInterval = -1 }, "MinRoundInterval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig(tbl)
			tt.change(&cfg)
			r, err := New(db, cfg)
			if !errors.Is(err, ErrInvalidConfig) || r != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig", r, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %s", err, tt.want)
			}
		})
	}

	t.Run("everything missing", func(t *testing.T) {
		_, err := New(db, Config[*cfgObj]{})
		for _, field := range []string{"Name", "Table", "Target", "GetObjectStatus", "SetObjectStatus", "CloneObject"} {
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error %q does not list %s", err, field)
			}
		}
	})
	t.Run("no db", func(t *testing.T) {
		if _, err := New(nil, validConfig(tbl)); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New(nil db): %v", err)
		}
	})
}

// The zero values of Config mean the documented defaults.
func TestNewDefaults(t *testing.T) {
	db, tbl := cfgTable(t)
	cfg := validConfig(tbl)
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = 0, 0
	r, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := r.(*reconciler[*cfgObj]).cfg
	if got.RetryBackoffMin != DefaultRetryBackoffMin || DefaultRetryBackoffMin != 100*time.Millisecond {
		t.Errorf("RetryBackoffMin = %v, want DefaultRetryBackoffMin = 100ms", got.RetryBackoffMin)
	}
	if got.RetryBackoffMax != DefaultRetryBackoffMax || DefaultRetryBackoffMax != time.Minute {
		t.Errorf("RetryBackoffMax = %v, want DefaultRetryBackoffMax = 1m", got.RetryBackoffMax)
	}
	if got.IncrementalRoundSize != DefaultIncrementalRoundSize || DefaultIncrementalRoundSize != 1000 {
		t.Errorf("IncrementalRoundSize = %v, want DefaultIncrementalRoundSize = 1000", got.IncrementalRoundSize)
	}
	if got.OperationTimeout != DefaultOperationTimeout || DefaultOperationTimeout != time.Minute {
		t.Errorf("OperationTimeout = %v, want DefaultOperationTimeout = 1m", got.OperationTimeout)
	}
	if got.FullReconciliationInterval != 0 {
		t.Errorf("FullReconciliationInterval = %v, want 0 (only on Prune)", got.FullReconciliationInterval)
	}
	if got.Workers != DefaultWorkers || DefaultWorkers != 1 {
		t.Errorf("Workers = %v, want DefaultWorkers = 1", got.Workers)
	}
	if got.RefreshRate != DefaultRefreshRate || DefaultRefreshRate != 100 {
		t.Errorf("RefreshRate = %v, want DefaultRefreshRate = 100", got.RefreshRate)
	}
	if got.RefreshInterval != 0 || got.MinRoundInterval != 0 {
		t.Errorf("RefreshInterval = %v, MinRoundInterval = %v, want 0 (never by age, no pause)", got.RefreshInterval, got.MinRoundInterval)
	}
	if _, ok := got.Metrics.(NopMetrics); !ok {
		t.Errorf("Metrics = %T, want NopMetrics", got.Metrics)
	}
	if got.Logger == nil {
		t.Error("Logger is nil, want slog.Default()")
	}
	if got.Health != nil {
		t.Errorf("Health = %v, want none", got.Health)
	}

	// A RetryBackoffMin above the default maximum raises the maximum.
	cfg.RetryBackoffMin = 2 * time.Minute
	r, err = New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(*reconciler[*cfgObj]).cfg.RetryBackoffMax; got != 2*time.Minute {
		t.Errorf("RetryBackoffMax = %v with RetryBackoffMin 2m, want 2m", got)
	}

	// Set values are kept.
	cfg = validConfig(tbl)
	cfg.IncrementalRoundSize, cfg.OperationTimeout, cfg.FullReconciliationInterval = 7, time.Second, time.Hour
	r, err = New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got = r.(*reconciler[*cfgObj]).cfg
	if got.IncrementalRoundSize != 7 || got.OperationTimeout != time.Second || got.FullReconciliationInterval != time.Hour ||
		got.RetryBackoffMin != time.Millisecond || got.RetryBackoffMax != 10*time.Millisecond {
		t.Errorf("set values changed: %+v", got)
	}
}

// opCounter counts OperationDone calls; it embeds NopMetrics, as a user's
// metrics may, and is timed all the same.
type opCounter struct {
	NopMetrics
	mu  sync.Mutex
	ops int
}

func (m *opCounter) OperationDone(_, _ string, _ Operation, d time.Duration, n, _ int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d >= 0 {
		m.ops += n
	}
}

// Objects' operations are timed for every Metrics but NopMetrics, the
// default, which discards the durations.
func TestUntimedOnlyForNopMetrics(t *testing.T) {
	for _, c := range []struct {
		metrics Metrics
		untimed bool
	}{
		{nil, true},
		{NopMetrics{}, true},
		{&NopMetrics{}, true},
		{&opCounter{}, false},
	} {
		db, tbl := cfgTable(t)
		cfg := validConfig(tbl)
		cfg.Metrics = c.metrics
		r, err := New(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.(*reconciler[*cfgObj]).untimed; got != c.untimed {
			t.Errorf("Metrics %T: untimed %v, want %v", c.metrics, got, c.untimed)
		}
	}
	// A user's metrics still sees every object's operation.
	db, tbl := cfgTable(t)
	cfg := validConfig(tbl)
	m := &opCounter{}
	cfg.Metrics = m
	r, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wtxn := db.WriteTxn(tbl)
	for i := range 5 {
		tbl.Insert(wtxn, &cfgObj{ID: strconv.Itoa(i), Status: StatusPending()})
	}
	rev := tbl.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops != 5 {
		t.Fatalf("OperationDone counted %d objects, want 5", m.ops)
	}
}
