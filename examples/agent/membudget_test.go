package main

import (
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/hive/job"
)

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"off", 0}, {"1", 1}, {"512B", 512}, {"4KiB", 4 << 10}, {"170MiB", 170 << 20},
		{" 2GiB ", 2 << 30}, {"1TiB", 1 << 40}, {"9223372036854775807", math.MaxInt64},
	} {
		got, err := parseBytes(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseBytes(%q) = %d, %v, want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "1.5GiB", "10MB", "1e6", "9000000TiB", "lots"} {
		if _, err := parseBytes(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("parseBytes(%q) = %v, want an error naming the input", bad, err)
		}
	}
}

// FuzzParseBytes checks parseBytes against a plain model: digits, then
// one of the units.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"0", "off", "170MiB", "1KiB", "12B", "x", "9999999999TiB"} {
		f.Add(s)
	}
	units := map[string]int64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseBytes(s)
		trimmed := strings.TrimSpace(s)
		if trimmed == "off" {
			if err != nil || got != 0 {
				t.Fatalf("parseBytes(%q) = %d, %v, want 0", s, got, err)
			}
			return
		}
		digits := strings.TrimRightFunc(trimmed, func(r rune) bool { return r < '0' || r > '9' })
		unit := strings.TrimSpace(trimmed[len(digits):])
		mult, known := units[unit]
		n, perr := strconv.ParseInt(strings.TrimSpace(digits), 10, 64)
		valid := known && perr == nil && digits != "" && digits[0] >= '0' && digits[0] <= '9' &&
			n <= math.MaxInt64/mult && strings.TrimSpace(digits) == digits
		if valid != (err == nil) {
			t.Fatalf("parseBytes(%q) = %d, %v; the model says valid=%v", s, got, err, valid)
		}
		if valid && got != n*mult {
			t.Fatalf("parseBytes(%q) = %d, want %d", s, got, n*mult)
		}
	})
}

// The budget turns the collector off up to the limit until ready, then
// GOGC=100 within it; a live heap above four fifths of the budget raises
// the limit to 1.25 x the live heap.
func TestMemoryBudget(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10)) // 4 MiB live
	}
	m := newMemBudget(1<<20, log) // 1 MiB: smaller than the live heap
	defer m.stop()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC during the start = %d, want off (-1)", got)
	}
	runtime.GC()
	m.afterGC() // as the cleanup does after every collection
	limit := debug.SetMemoryLimit(-1)
	if limit < 5<<20 {
		t.Errorf("limit after a collection with %d MiB live = %d, want at least 1.25 x live (the budget is 1 MiB)", 4, limit)
	}
	m.ready()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after ready = %d, want 100", got)
	}
	runtime.KeepAlive(keep)
	m.stop()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after stop = %d, want none", got)
	}
}

func TestMemoryBudgetFlag(t *testing.T) {
	cfg := defaultConfig()
	cfg.MemoryBudget = "a lot"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "--memory-budget") || !strings.Contains(err.Error(), `"a lot"`) {
		t.Errorf("Validate with --memory-budget %q = %v, want an error naming the flag and the value", cfg.MemoryBudget, err)
	}
}

// A budget without its unit (bytes) is warned about, and applied.
func TestMemoryBudgetTooSmallWarns(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := defaultConfig()
	cfg.MemoryBudget = "170"
	if err := startMemoryBudget(nopJobs{}, cfg, newFirstRounds(), log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "very small") || !strings.Contains(logs.String(), "bytes=170") {
		t.Errorf("no warning for --memory-budget 170:\n%s", logs.String())
	}
}

// nopJobs is a job.Group that drops its jobs.
type nopJobs struct{}

func (nopJobs) Add(...job.Job) error { return nil }

// The hive's build runs with the collector off, up to --memory-budget,
// unless the budget is 0 or the environment chose; undo puts the defaults
// back.
func TestBuildGCOff(t *testing.T) {
	gogc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(gogc)
		debug.SetMemoryLimit(limit)
	})
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	for _, budget := range []string{DefaultMemoryBudget, "64MiB"} {
		want, _ := parseBytes(budget)
		undo, off := buildGCOff(budget)
		gogc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
		undo()
		if !off || gogc != -1 || limit != want {
			t.Errorf("--memory-budget %s, during the build: off %v, GOGC %d, limit %d; want off, -1, %d", budget, off, gogc, limit, want)
		}
		if gogc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1); gogc != 100 || limit != math.MaxInt64 {
			t.Errorf("after undo: GOGC %d, limit %d; want 100 and none", gogc, limit)
		}
		debug.SetGCPercent(100)
	}
	for _, c := range []struct{ budget, gogc string }{{"0", ""}, {"a lot", ""}, {DefaultMemoryBudget, "50"}} {
		t.Setenv("GOGC", c.gogc)
		undo, off := buildGCOff(c.budget)
		undo()
		if got := debug.SetGCPercent(100); off || got != 100 {
			t.Errorf("--memory-budget %q, GOGC=%q: off %v, GOGC %d; want untouched (100)", c.budget, c.gogc, off, got)
		}
	}
}
