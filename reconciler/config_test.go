package reconciler

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// New rejects every bad config with ErrInvalidConfig and says what is
// wrong.
func TestNewInvalidConfig(t *testing.T) {
	db, tbl := newTestTable(t)
	tests := []struct {
		name   string
		change func(*Config[*testObj])
		want   string // in the error
	}{
		{"no name", func(c *Config[*testObj]) { c.Name = "" }, "Name"},
		{"upper-case name", func(c *Config[*testObj]) { c.Name = "Routes" }, "Name"},
		{"name with a space", func(c *Config[*testObj]) { c.Name = "my routes" }, "Name"},
		{"name starting with a digit", func(c *Config[*testObj]) { c.Name = "1routes" }, "Name"},
		{"name too long", func(c *Config[*testObj]) { c.Name = "r" + strings.Repeat("x", 64) }, "Name"},
		{"no table", func(c *Config[*testObj]) { c.Table = nil }, "Table"},
		{"no target", func(c *Config[*testObj]) { c.Target = nil }, "Target"},
		{"no GetObjectStatus", func(c *Config[*testObj]) { c.GetObjectStatus = nil }, "GetObjectStatus"},
		{"no SetObjectStatus", func(c *Config[*testObj]) { c.SetObjectStatus = nil }, "SetObjectStatus"},
		{"no CloneObject", func(c *Config[*testObj]) { c.CloneObject = nil }, "CloneObject"},
		{"negative interval", func(c *Config[*testObj]) { c.FullReconciliationInterval = -1 }, "FullReconciliationInterval"},
		{"negative backoff", func(c *Config[*testObj]) { c.RetryBackoffMin = -1 }, "backoff"},
		{"max below min", func(c *Config[*testObj]) { c.RetryBackoffMin, c.RetryBackoffMax = time.Second, time.Millisecond }, "RetryBackoffMax"},
		{"negative round size", func(c *Config[*testObj]) { c.IncrementalRoundSize = -1 }, "IncrementalRoundSize"},
		{"negative timeout", func(c *Config[*testObj]) { c.OperationTimeout = -1 }, "OperationTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(tbl, newTestTarget())
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
		_, err := New(db, Config[*testObj]{})
		for _, field := range []string{"Name", "Table", "Target", "GetObjectStatus", "SetObjectStatus", "CloneObject"} {
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error %q does not list %s", err, field)
			}
		}
	})
	t.Run("no db", func(t *testing.T) {
		if _, err := New(nil, testConfig(tbl, newTestTarget())); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New(nil db): %v", err)
		}
	})
}

// The zero values of Config mean the documented defaults.
func TestNewDefaults(t *testing.T) {
	db, tbl := newTestTable(t)
	cfg := testConfig(tbl, newTestTarget())
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = 0, 0
	r, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := r.(*reconciler[*testObj]).cfg
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
	if got := r.(*reconciler[*testObj]).cfg.RetryBackoffMax; got != 2*time.Minute {
		t.Errorf("RetryBackoffMax = %v with RetryBackoffMin 2m, want 2m", got)
	}

	// Set values are kept.
	cfg = testConfig(tbl, newTestTarget())
	cfg.IncrementalRoundSize, cfg.OperationTimeout, cfg.FullReconciliationInterval = 7, time.Second, time.Hour
	r, err = New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got = r.(*reconciler[*testObj]).cfg
	if got.IncrementalRoundSize != 7 || got.OperationTimeout != time.Second || got.FullReconciliationInterval != time.Hour ||
		got.RetryBackoffMin != time.Millisecond || got.RetryBackoffMax != 10*time.Millisecond {
		t.Errorf("set values changed: %+v", got)
	}
}
