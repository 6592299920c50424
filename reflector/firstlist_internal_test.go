package reflector

import (
	"log/slog"
	"testing"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

type kv struct {
	K      string
	V      int
	Status reconciler.Status
}

var kvIndex = statedb.Index[*kv, string]{
	Name:       "k",
	FromObject: func(o *kv) index.KeySet { return index.NewKeySet(index.String(o.K)) },
	FromKey:    index.String,
	Unique:     true,
}

// The maps of a first list into an empty table are made only once Idle is
// closed, or when a use of them (the next commit) comes first; until
// then the fill counts the keys it staged.
func TestFirstListMapsWaitForIdle(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "kvs", kvIndex)
	if err != nil {
		t.Fatal(err)
	}
	writer := reconciler.DesiredWriter[*kv]{
		Table: table,
		Equal: func(a, b *kv) bool { return a.K == b.K && a.V == b.V },
		SetObjectStatus: func(o *kv, s reconciler.Status) *kv {
			o.Status = s
			return o
		},
	}
	transform := func(key string, v int) (*kv, error) { return &kv{K: key, V: v}, nil }
	for _, next := range []string{"idle", "commit"} {
		idle := make(chan struct{})
		filler, err := Into[int, *kv]{Table: "kvs", Writer: writer, Transform: transform}.newFill(slog.New(slog.DiscardHandler), idle)
		if err != nil {
			t.Fatal(err)
		}
		f := filler.(*fill[int, *kv])
		commit := func(initial bool, evs ...Event[int]) {
			f.begin(len(evs), initial)
			wtxn := db.WriteTxn(table)
			for _, ev := range evs {
				if ev.Kind == Put {
					f.put(wtxn, ev.Key, ev.Value)
				} else {
					f.del(wtxn, ev.Key)
				}
			}
			wtxn.Commit()
			f.keep()
		}
		var list []Event[int]
		for i := range 100 {
			list = append(list, Event[int]{Kind: Put, Key: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Value: i})
		}
		commit(true, list...)
		if len(f.held) != 0 || len(f.owners) != 0 || f.building != 100 || f.objects() != 100 {
			t.Fatalf("%s: after the list, held %d, owners %d, building %d, objects %d; want 0, 0, 100, 100", next, len(f.held), len(f.owners), f.building, f.objects())
		}
		switch next {
		case "idle":
			close(idle)
			f.settle()
		case "commit":
			commit(false, Event[int]{Kind: Delete, Key: list[0].Key})
			if n := table.NumObjects(db.ReadTxn()); n != 99 {
				t.Fatalf("commit: the delete of a staged key left %d objects, want 99", n)
			}
		}
		want := 100
		if next == "commit" {
			want = 99
		}
		if len(f.held) != want || len(f.owners) != want || f.building != 0 || f.objects() != want {
			t.Fatalf("%s: held %d, owners %d, building %d, objects %d; want %d, %d, 0, %d", next, len(f.held), len(f.owners), f.building, f.objects(), want, want, want)
		}
		for _, ev := range list[1:] {
			if k := f.held[ev.Key]; k.val != ev.Value || len(f.owners[k.pk]) != 1 || f.owners[k.pk][0] != ev.Key {
				t.Fatalf("%s: key %s held %+v with owners %v", next, ev.Key, k, f.owners[k.pk])
			}
		}
		db = statedb.New() // the next case's table is empty
		if table, err = statedb.NewTable(db, "kvs", kvIndex); err != nil {
			t.Fatal(err)
		}
		writer.Table = table
	}
}
