package hive_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

// Five private types per module, each built from the previous one.
type (
	bench0 struct{}
	bench1 struct{}
	bench2 struct{}
	bench3 struct{}
	bench4 struct{}
)

func benchHook(lc cell.Lifecycle) { lc.Append(cell.Hook{}) }

// benchModule is a module of ten cells: five private constructors that
// each append a hook, and five invokes that use the constructed value, the
// logger, the health scope, the job group (one timer job) and the
// lifecycle.
func benchModule(i int) cell.Cell {
	return cell.Module(fmt.Sprintf("m%d", i), "bench",
		cell.ProvidePrivate(func(lc cell.Lifecycle) *bench0 { benchHook(lc); return &bench0{} }),
		cell.ProvidePrivate(func(lc cell.Lifecycle, _ *bench0) *bench1 { benchHook(lc); return &bench1{} }),
		cell.ProvidePrivate(func(lc cell.Lifecycle, _ *bench1) *bench2 { benchHook(lc); return &bench2{} }),
		cell.ProvidePrivate(func(lc cell.Lifecycle, _ *bench2) *bench3 { benchHook(lc); return &bench3{} }),
		cell.ProvidePrivate(func(lc cell.Lifecycle, _ *bench3) *bench4 { benchHook(lc); return &bench4{} }),
		cell.Invoke(func(*bench4) {}),
		cell.Invoke(func(*slog.Logger) {}),
		cell.Invoke(func(h cell.Health) { h.OK("ready") }),
		cell.Invoke(func(g job.Group) error {
			return g.Add(job.Timer("tick", func(context.Context) error { return nil }, time.Hour))
		}),
		cell.Invoke(benchHook),
	)
}

// BenchmarkHive populates, starts and stops a hive of 100 modules of 10
// cells each, reporting the cost of a whole startup and shutdown.
func BenchmarkHive(b *testing.B) {
	const modules = 100
	cells := make([]cell.Cell, modules)
	for i := range cells {
		cells[i] = benchModule(i)
	}
	b.Run("populate", func(b *testing.B) {
		for b.Loop() {
			if err := newHive(cells...).Populate(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(modules*b.N)/b.Elapsed().Seconds(), "modules/sec")
	})
	b.Run("populate+start+stop", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			h := newHive(cells...)
			if err := h.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if err := h.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(modules*b.N)/b.Elapsed().Seconds(), "modules/sec")
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/hive")
	})
}

// TestBenchHiveWorks checks the benchmark's hive, so a broken benchmark
// fails the tests too.
func TestBenchHiveWorks(t *testing.T) {
	h := hivetest.Start(t, benchModule(0), benchModule(1))
	// 2 modules × (5 constructor hooks + 1 invoke hook + group + jobs).
	if hooks := hookNames(t, h); len(hooks) != 16 {
		t.Fatalf("%d hooks, want 16: %v", len(hooks), hooks)
	}
}
