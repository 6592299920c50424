package main

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/steadystate/steadystate/reflector"
)

// decodedAs checks that got (the cache's decode of data, with gotErr) is
// the whole file's decode.
func decodedAs(t *testing.T, got []reflector.Item[fileObject], gotErr error, data []byte) {
	t.Helper()
	want, wantErr := decodeFileItems("desired.yaml", data)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("error %v, want %v", gotErr, wantErr)
	}
	if !sameItems(got, want) {
		t.Fatal("the cache's decode differs from the whole file's")
	}
}

// The items of a first version are the caller's while the cache is
// filled from them in the background: the caller overwriting them at once
// changes nothing of the cache (and, under -race, is no race).
func TestEntryCacheFillCallerItems(t *testing.T) {
	first := restartDesired(2_000, 200)
	edited := bytes.Replace(first, []byte("prefix: 10.0.3.0/24\n"), []byte("prefix: 10.200.3.0/24\n"), 1)
	for range 5 {
		c := newEntryCache(fileKeyList(), decodeFileItems)
		items, err := c.decode("desired.yaml", first)
		if err != nil {
			t.Fatal(err)
		}
		clear(items) // the caller's to change, while the fill runs
		got, err := c.decode("desired.yaml", edited)
		decodedAs(t, got, err, edited)
		if c.served != 1 {
			t.Fatalf("the edit was not decoded from the cache (%d from it)", c.served)
		}
	}
}

// Right after a first version (its fill still running): a broken version
// fails as the whole decode does, and the good edit after it still comes
// from the first version's cache; a first version the cache cannot take
// (not of the block shape) is decoded whole, and so is the next.
func TestEntryCacheFillThenError(t *testing.T) {
	first := restartDesired(2_000, 200)
	bad := bytes.Replace(first, []byte("prefix: 10.0.7.0/24\n    type: blackhole\n"), []byte("prefix: 10.0.7.0/24\n    type: blackhol\n"), 1)
	edited := bytes.Replace(first, []byte("prefix: 10.0.3.0/24\n"), []byte("prefix: 10.200.3.0/24\n"), 1)
	if bytes.Equal(bad, first) || bytes.Equal(edited, first) {
		t.Fatal("no route to break or edit")
	}
	for range 5 {
		c := newEntryCache(fileKeyList(), decodeFileItems)
		got, err := c.decode("desired.yaml", first)
		decodedAs(t, got, err, first)
		got, err = c.decode("desired.yaml", bad) // no wait in between
		if err == nil || got != nil {
			t.Fatalf("a broken version right after the first: %d items, error %v", len(got), err)
		}
		decodedAs(t, got, err, bad)
		got, err = c.decode("desired.yaml", edited)
		decodedAs(t, got, err, edited)
		if c.served != 1 {
			t.Fatalf("the edit after the broken version was not decoded from the cache (%d from it)", c.served)
		}
	}

	// A flow-style entry: not of the shape, so no fill; each version whole.
	flow := bytes.Replace(first, []byte("  - prefix: 10.0.3.0/24\n    type: blackhole\n"), []byte("  - {prefix: 10.0.3.0/24, type: blackhole}\n"), 1)
	if bytes.Equal(flow, first) {
		t.Fatal("no route 10.0.3.0/24 to restyle")
	}
	c := newEntryCache(fileKeyList(), decodeFileItems)
	got, err := c.decode("desired.yaml", flow)
	decodedAs(t, got, err, flow)
	got, err = c.decode("desired.yaml", edited)
	decodedAs(t, got, err, edited)
	if c.served != 0 {
		t.Fatalf("%d versions decoded from a cache that could not be filled", c.served)
	}
	got, err = c.decode("desired.yaml", first) // filled from edited: from the cache
	decodedAs(t, got, err, first)
	if c.served != 1 {
		t.Fatalf("the version after a whole decode was not decoded from its cache (%d from it)", c.served)
	}
}
