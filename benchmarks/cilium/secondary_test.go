package cilium

import (
	"fmt"
	"strconv"
	"testing"

	cstatedb "github.com/cilium/statedb"
	cindex "github.com/cilium/statedb/index"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// The shapes of cilium's own benchmarks on a table with a non-unique
// secondary index (every object carries the tag "test", as there), and
// its ListInsert:
//
//   - WriteTxnSecondary/batch=100: BenchmarkDB_WriteTxn_100_SecondaryIndex,
//     100 new objects (IDs 0..99, replacing those of the previous op) per
//     committed transaction.
//   - PrefixSecondary: BenchmarkDB_Prefix_SecondaryIndex, Prefix on the tag
//     index with the key "test" over a table of 1000, counting 1000.
//   - LowerBoundSecondary: BenchmarkDB_LowerBound_SecondaryIndex,
//     LowerBound on the tag index from "t", counting 1000.
//   - ListInsert: BenchmarkDB_ListInsert, per op one transaction that,
//     for each of 1000 objects in a fixed random order, lists it by primary
//     key and inserts a copy of what it found.

// tagged is what both sides store in the secondary-index shapes.
type tagged struct {
	ID  uint64
	Tag string
}

// TableHeader and TableRow make tagged storable in cilium's tables.
func (o *tagged) TableHeader() []string { return []string{"ID", "Tag"} }
func (o *tagged) TableRow() []string    { return []string{strconv.FormatUint(o.ID, 10), o.Tag} }

// theTag is the tag of every object, as in cilium's benchmarks.
const theTag = "test"

// secondarySize is the table of PrefixSecondary and LowerBoundSecondary.
const secondarySize = 1000

var (
	ssTaggedID = statedb.Index[*tagged, uint64]{
		Name:       "id",
		FromObject: func(o *tagged) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	ssTag = statedb.Index[*tagged, string]{
		Name:       "tag",
		FromObject: func(o *tagged) index.KeySet { return index.NewKeySet(index.String(o.Tag)) },
		FromKey:    index.String,
	}
	ciTaggedID = cstatedb.Index[*tagged, uint64]{
		Name:       "id",
		FromObject: func(o *tagged) cindex.KeySet { return cindex.NewKeySet(cindex.Uint64(o.ID)) },
		FromKey:    cindex.Uint64,
		Unique:     true,
	}
	ciTag = cstatedb.Index[*tagged, string]{
		Name:       "tag",
		FromObject: func(o *tagged) cindex.KeySet { return cindex.NewKeySet(cindex.String(o.Tag)) },
		FromKey:    cindex.String,
	}
)

// tagSide is a side of the secondary-index shapes: a table of tagged with
// the tag index.
type tagSide interface {
	// insert writes a new object tagged theTag for each id in one
	// committed transaction.
	insert(ids []uint64)
	// prefix and lowerBound count the objects of the tag index from one
	// snapshot, by Prefix with key and by LowerBound from key.
	prefix(key string) int
	lowerBound(key string) int
}

// BenchmarkWriteTxnSecondary commits 100 new tagged objects per op.
func BenchmarkWriteTxnSecondary(b *testing.B) {
	keys := ids(100)
	b.Run("batch=100", func(b *testing.B) {
		pair(b, newSSTagged, newCiliumTagged, func(b *testing.B, s tagSide) {
			n := 0
			for b.Loop() {
				s.insert(keys)
				n += len(keys)
			}
			reportObjectsPerSec(b, n)
		})
	})
}

// BenchmarkPrefixSecondary walks the tag "test" of a table of 1000 per op.
func BenchmarkPrefixSecondary(b *testing.B) {
	benchTagRead(b, func(s tagSide) int { return s.prefix(theTag) })
}

// BenchmarkLowerBoundSecondary walks the tag index from "t" per op.
func BenchmarkLowerBoundSecondary(b *testing.B) {
	benchTagRead(b, func(s tagSide) int { return s.lowerBound("t") })
}

func benchTagRead(b *testing.B, read func(tagSide) int) {
	filled := func(new func(testing.TB) tagSide) func(testing.TB) tagSide {
		return func(tb testing.TB) tagSide { s := new(tb); s.insert(ids(secondarySize)); return s }
	}
	pair(b, filled(newSSTagged), filled(newCiliumTagged), func(b *testing.B, s tagSide) {
		n := 0
		for b.Loop() {
			if got := read(s); got != secondarySize {
				b.Fatalf("read %d objects, want %d", got, secondarySize)
			}
			n += secondarySize
		}
		reportObjectsPerSec(b, n)
	})
}

// BenchmarkListInsert lists each of 1000 objects by primary key and
// inserts a copy of it, in one transaction per op.
func BenchmarkListInsert(b *testing.B) {
	keys := shuffled(randomInsertSize, 4)
	newSS := func(tb testing.TB) listInserter { s := newSSDB(tb, "objects"); s.fill(0, keys); return s }
	newCilium := func(tb testing.TB) listInserter { c := newCiDB(tb, "objects"); c.fill(0, keys); return c }
	pair(b, newSS, newCilium, func(b *testing.B, s listInserter) {
		n := 0
		for b.Loop() {
			if got := s.listInsert(keys); got != len(keys) {
				b.Fatalf("copied %d objects, want %d", got, len(keys))
			}
			n += len(keys)
		}
		reportObjectsPerSec(b, n)
	})
}

// listInserter is a side of ListInsert: table 0 holds an object per id.
type listInserter interface {
	// listInsert copies each object of ids in one committed transaction,
	// listed by primary key, and returns how many it copied.
	listInsert(ids []uint64) int
}

type ssTagged struct {
	db  *statedb.DB
	tbl statedb.RWTable[*tagged]
}

func newSSTagged(tb testing.TB) tagSide {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "tagged", ssTaggedID, ssTag)
	if err != nil {
		tb.Fatal(err)
	}
	return &ssTagged{db: db, tbl: tbl}
}

func (s *ssTagged) insert(ids []uint64) {
	wtxn := s.db.WriteTxn(s.tbl)
	for _, id := range ids {
		_, _, err := s.tbl.Insert(wtxn, &tagged{ID: id, Tag: theTag})
		must(err)
	}
	wtxn.Commit()
}

func (s *ssTagged) prefix(key string) int {
	n := 0
	for range s.tbl.Prefix(s.db.ReadTxn(), ssTag.Query(key)) {
		n++
	}
	return n
}

func (s *ssTagged) lowerBound(key string) int {
	n := 0
	for range s.tbl.LowerBound(s.db.ReadTxn(), ssTag.Query(key)) {
		n++
	}
	return n
}

type ciTagged struct {
	db  *cstatedb.DB
	tbl cstatedb.RWTable[*tagged]
}

func newCiliumTagged(tb testing.TB) tagSide {
	db := cstatedb.New()
	tbl, err := cstatedb.NewTable(db, "tagged", ciTaggedID, ciTag)
	if err != nil {
		tb.Fatal(err)
	}
	if err := db.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return &ciTagged{db: db, tbl: tbl}
}

func (c *ciTagged) insert(ids []uint64) {
	wtxn := c.db.WriteTxn(c.tbl)
	for _, id := range ids {
		_, _, err := c.tbl.Insert(wtxn, &tagged{ID: id, Tag: theTag})
		must(err)
	}
	wtxn.Commit()
}

func (c *ciTagged) prefix(key string) int {
	n := 0
	for range c.tbl.Prefix(c.db.ReadTxn(), ciTag.Query(key)) {
		n++
	}
	return n
}

func (c *ciTagged) lowerBound(key string) int {
	n := 0
	for range c.tbl.LowerBound(c.db.ReadTxn(), ciTag.Query(key)) {
		n++
	}
	return n
}

func (s *ssDB) listInsert(ids []uint64) int {
	tbl := s.tables[0]
	wtxn := s.db.WriteTxn(tbl)
	n := 0
	for _, id := range ids {
		for old := range tbl.List(wtxn, ssID.Query(id)) {
			cp := *old
			_, _, err := tbl.Insert(wtxn, &cp)
			must(err)
			n++
		}
	}
	wtxn.Commit()
	return n
}

func (c *ciDB) listInsert(ids []uint64) int {
	tbl := c.tables[0]
	wtxn := c.db.WriteTxn(tbl)
	n := 0
	for _, id := range ids {
		for old := range tbl.List(wtxn, ciID.Query(id)) {
			cp := *old
			_, _, err := tbl.Insert(wtxn, &cp)
			must(err)
			n++
		}
	}
	wtxn.Commit()
	return n
}

// checkTagged fails unless the side holds the objects of ids, all tagged.
func checkTagged(s tagSide, n int) error {
	if got := s.prefix(theTag); got != n {
		return fmt.Errorf("prefix %q: %d objects, want %d", theTag, got, n)
	}
	if got := s.prefix("x"); got != 0 {
		return fmt.Errorf("prefix %q: %d objects, want 0", "x", got)
	}
	if got := s.lowerBound("t"); got != n {
		return fmt.Errorf("lower bound %q: %d objects, want %d", "t", got, n)
	}
	if got := s.lowerBound("u"); got != 0 {
		return fmt.Errorf("lower bound %q: %d objects, want 0", "u", got)
	}
	return nil
}
