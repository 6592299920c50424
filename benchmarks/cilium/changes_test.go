package cilium

import (
	"fmt"
	"testing"

	cstatedb "github.com/cilium/statedb"

	"github.com/steadystate/steadystate/statedb"
)

// changesSize is the number of objects of a Changes op, as in cilium's
// benchmark.
const changesSize = 1000

// BenchmarkChanges inserts 1000 objects per op into a table with a change
// iterator, reads the 1000 inserts through it, deletes every object with
// DeleteAll, waits for the iterator's watch channel and reads the 1000
// deletes: cilium's BenchmarkDB_Changes shape. objects/sec counts each
// object once (inserted, then deleted).
func BenchmarkChanges(b *testing.B) {
	keys := ids(changesSize)
	pair(b, newSSChanges, newCiliumChanges, func(b *testing.B, c changer) {
		n := 0
		for b.Loop() {
			if err := c.round(keys); err != nil {
				b.Fatal(err)
			}
			n += len(keys)
		}
		reportObjectsPerSec(b, n)
	})
}

// changer is a side of Changes: a table and a change iterator on it.
type changer interface {
	// round inserts an object for each id and deletes them all, reading
	// the changes after each commit; it fails unless it saw one insert and
	// one delete per id.
	round(ids []uint64) error
}

type ssChanges struct {
	*ssDB
	iter statedb.ChangeIterator[*object]
}

func newSSChanges(tb testing.TB) changer {
	c := &ssChanges{ssDB: newSSDB(tb, "objects")}
	wtxn := c.db.WriteTxn(c.tables[0])
	iter, err := c.tables[0].Changes(wtxn)
	if err != nil {
		tb.Fatal(err)
	}
	wtxn.Commit()
	c.iter = iter
	tb.Cleanup(iter.Close)
	return c
}

func (c *ssChanges) round(ids []uint64) error {
	c.fill(0, ids)
	changes, watch := c.iter.Next(c.db.ReadTxn())
	inserted := 0
	for ch := range changes {
		if ch.Deleted {
			return fmt.Errorf("delete of %d among the inserts", ch.Object.ID)
		}
		inserted++
	}
	wtxn := c.db.WriteTxn(c.tables[0])
	must(c.tables[0].DeleteAll(wtxn))
	wtxn.Commit()
	<-watch
	changes, _ = c.iter.Next(c.db.ReadTxn())
	deleted := 0
	for ch := range changes {
		if !ch.Deleted {
			return fmt.Errorf("insert of %d among the deletes", ch.Object.ID)
		}
		deleted++
	}
	return countsOK(inserted, deleted, len(ids))
}

type ciChanges struct {
	*ciDB
	iter cstatedb.ChangeIterator[*object]
}

func newCiliumChanges(tb testing.TB) changer {
	c := &ciChanges{ciDB: newCiDB(tb, "objects")}
	wtxn := c.db.WriteTxn(c.tables[0])
	iter, err := c.tables[0].Changes(wtxn)
	if err != nil {
		tb.Fatal(err)
	}
	wtxn.Commit()
	c.iter = iter
	tb.Cleanup(iter.Close)
	return c
}

func (c *ciChanges) round(ids []uint64) error {
	c.fill(0, ids)
	changes, watch := c.iter.Next(c.db.ReadTxn())
	inserted := 0
	for ch := range changes {
		if ch.Deleted {
			return fmt.Errorf("delete of %d among the inserts", ch.Object.ID)
		}
		inserted++
	}
	wtxn := c.db.WriteTxn(c.tables[0])
	must(c.tables[0].DeleteAll(wtxn))
	wtxn.Commit()
	<-watch
	changes, _ = c.iter.Next(c.db.ReadTxn())
	deleted := 0
	for ch := range changes {
		if !ch.Deleted {
			return fmt.Errorf("insert of %d among the deletes", ch.Object.ID)
		}
		deleted++
	}
	return countsOK(inserted, deleted, len(ids))
}

func countsOK(inserted, deleted, want int) error {
	if inserted != want || deleted != want {
		return fmt.Errorf("saw %d inserts and %d deletes, want %d of each", inserted, deleted, want)
	}
	return nil
}
