package statedb

import (
	"iter"
	"testing"
)

// BenchmarkRead measures the iterating reads of a 1000-object table with a
// unique primary index (id) and a non-unique secondary index (name, ten
// objects per name), one ReadTxn per op:
//
//	all:                  All, every object
//	prefix-primary:       Prefix of the ids 0..255 (the first 7 bytes of the key)
//	prefix-secondary:     Prefix "name-000" of the name index (100 objects)
//	lowerbound-primary:   LowerBound from id 500 (500 objects)
//	lowerbound-secondary: LowerBound from "name-0050" (500 objects)
//	list-secondary:       List of one name (10 objects)
//	get-secondary:        Get of one name (the first of its 10 objects)
func BenchmarkRead(b *testing.B) {
	db, tbl, _ := newBenchTable(b, benchNameIndex)
	reads := []struct {
		name string
		want int
		read func(ReadTxn) iter.Seq2[*benchObject, Revision]
	}{
		{"all", benchTableSize, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] { return tbl.All(txn) }},
		{"prefix-primary", 256, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] {
			q := benchIDIndex.Query(0)
			q.key = q.key[:7]
			return tbl.Prefix(txn, q)
		}},
		{"prefix-secondary", 100, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] {
			return tbl.Prefix(txn, benchNameIndex.Query("name-000"))
		}},
		{"lowerbound-primary", 500, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] {
			return tbl.LowerBound(txn, benchIDIndex.Query(500))
		}},
		{"lowerbound-secondary", 500, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] {
			return tbl.LowerBound(txn, benchNameIndex.Query("name-0050"))
		}},
		{"list-secondary", 10, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] {
			return tbl.List(txn, benchNameIndex.Query("name-0042"))
		}},
		{"get-secondary", 1, func(txn ReadTxn) iter.Seq2[*benchObject, Revision] {
			return func(yield func(*benchObject, Revision) bool) {
				if obj, rev, ok := tbl.Get(txn, benchNameIndex.Query("name-0042")); ok {
					yield(obj, rev)
				}
			}
		}},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			seen := 0
			for b.Loop() {
				n := 0
				for range r.read(db.ReadTxn()) {
					n++
				}
				if n != r.want {
					b.Fatalf("read %d objects, want %d", n, r.want)
				}
				seen += n
			}
			reportObjectsPerSec(b, seen)
		})
	}
}
