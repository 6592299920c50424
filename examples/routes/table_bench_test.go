package routes

import (
	"runtime"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// BenchmarkTableWrites measures what a start's 50,000 routes cost the
// routes table, index by index: their insert (Pending, the reflector's
// commit) and their status write (Done, the reconciler's), each in one
// write transaction, with the primary index alone, with StatusIndex, with
// CoveringIndex and with both (the table NewTable makes). live-MB is the
// heap the table holds after the insert.
func BenchmarkTableWrites(b *testing.B) {
	prefixes := benchPrefixes(50_000)
	for _, c := range []struct {
		name string
		idx  []statedb.Indexer[*Route]
	}{
		{"primary", nil},
		{"status", []statedb.Indexer[*Route]{StatusIndex}},
		{"covering", []statedb.Indexer[*Route]{CoveringIndex}},
		{"both", []statedb.Indexer[*Route]{StatusIndex, CoveringIndex}},
	} {
		b.Run("indexes="+c.name, func(b *testing.B) {
			var live uint64
			for b.Loop() {
				b.StopTimer()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				db := statedb.New()
				tbl, err := statedb.NewTable(db, TableName, PrimaryIndex, c.idx...)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				wtxn := db.WriteTxn(tbl)
				for _, p := range prefixes {
					if _, _, err := tbl.Insert(wtxn, &Route{Prefix: p, Type: TypeBlackhole, Status: reconciler.StatusPending()}); err != nil {
						b.Fatal(err)
					}
				}
				wtxn.Commit()
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				live = after.HeapAlloc - before.HeapAlloc
				b.StartTimer()
				wtxn = db.WriteTxn(tbl)
				done := reconciler.StatusDone()
				for r := range tbl.All(wtxn) {
					c := r.Clone()
					c.Status = done
					if _, _, err := tbl.Insert(wtxn, c); err != nil {
						b.Fatal(err)
					}
				}
				wtxn.Commit()
			}
			b.ReportMetric(float64(live)/(1<<20), "live-MB")
		})
	}
}
