package etcd_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/etcd"
)

// The layout version is written by the first write of an apply, staged or
// in place (a prefix written before versions existed), in the same
// transaction; a version this package does not know is refused by
// CheckLayout, Fleet and ApplyTables, which write nothing.
func TestLayoutVersion(t *testing.T) {
	cl := startServer(t)
	c := cl.Client()
	ctx := ctxT(t)
	l := etcd.Layout{Prefix: "/layout/test"}
	if err := etcd.CheckLayout(ctx, c, l); err != nil {
		t.Fatalf("an empty prefix: %v", err)
	}
	version := func() (string, int64) {
		t.Helper()
		resp, err := c.Get(ctx, l.VersionKey())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: %v, %v", l.VersionKey(), resp, err)
		}
		return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision
	}

	// First apply: staged; its first write takes the generation number.
	if _, err := etcd.Apply(ctx, c, l, "t", etcd.ScopeAll, objects(2, "1")); err != nil {
		t.Fatal(err)
	}
	v, created := version()
	counter, err := c.Get(ctx, l.Scope("t", etcd.ScopeAll)+"next")
	if err != nil || len(counter.Kvs) != 1 {
		t.Fatal(err)
	}
	if v != strconv.Itoa(etcd.LayoutVersion) || created != counter.Kvs[0].CreateRevision {
		t.Fatalf("layout %q created at %d; want %d, created with the first write (%d)", v, created, etcd.LayoutVersion, counter.Kvs[0].CreateRevision)
	}
	if err := etcd.CheckLayout(ctx, c, l); err != nil {
		t.Fatal(err)
	}

	// A prefix written before versions existed: the first in-place apply
	// writes it, in its transaction.
	if _, err := c.Delete(ctx, l.VersionKey()); err != nil {
		t.Fatal(err)
	}
	rev, err := etcd.Apply(ctx, c, l, "t", etcd.ScopeAll, objects(2, "2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, created := version(); created != rev {
		t.Fatalf("layout created at %d, the in-place apply at %d", created, rev)
	}

	// A prefix of version 2 (before pins and rollouts) is read and
	// written as it is, and keeps its version (a program that knows 2
	// only reads it still); a rollout's start writes 3.
	if _, err := c.Put(ctx, l.VersionKey(), "2"); err != nil {
		t.Fatal(err)
	}
	if err := etcd.CheckLayout(ctx, c, l); err != nil {
		t.Fatalf("version 2: %v", err)
	}
	if _, err := etcd.Apply(ctx, c, l, "t", etcd.ScopeAll, objects(2, "v2")); err != nil {
		t.Fatalf("an apply on version 2: %v", err)
	}
	if _, err := etcd.Fleet(ctx, c, l); err != nil {
		t.Fatalf("the fleet view of version 2: %v", err)
	}
	if v, _ := version(); v != "2" {
		t.Fatalf("an apply changed layout version 2 to %q", v)
	}
	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1"}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"t": objects(2, "v3")},
		Steps: []etcd.StepSize{{Percent: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := version(); v != strconv.Itoa(etcd.LayoutVersion) {
		t.Fatalf("a rollout's start left layout version %q", v)
	}
	if _, err := etcd.AbortRollout(ctx, c, l, ""); err != nil {
		t.Fatal(err)
	}
	d.Close(ctx)
	p.Stop(ctx)

	// An unknown version is refused, and nothing is written.
	for _, bad := range []string{"4", "garbage", ""} {
		if _, err := c.Put(ctx, l.VersionKey(), bad); err != nil {
			t.Fatal(err)
		}
		before, err := c.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"CheckLayout": etcd.CheckLayout(ctx, c, l),
			"ApplyTables": func() error { _, err := etcd.Apply(ctx, c, l, "t", etcd.ScopeAll, objects(3, "3")); return err }(),
			"Fleet":       func() error { _, err := etcd.Fleet(ctx, c, l); return err }(),
		} {
			if !errors.Is(err, etcd.ErrUnknownLayout) || !strings.Contains(err.Error(), l.VersionKey()) || !strings.Contains(err.Error(), strconv.Quote(bad)) {
				t.Errorf("%s with layout %q: %v", what, bad, err)
			}
		}
		after, err := c.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		if after.Header.Revision != before.Header.Revision {
			t.Fatalf("layout %q: refused, yet etcd moved from revision %d to %d", bad, before.Header.Revision, after.Header.Revision)
		}
	}

	// A migration between an apply's read and its commit fails it.
	if _, err := c.Put(ctx, l.VersionKey(), strconv.Itoa(etcd.LayoutVersion)); err != nil {
		t.Fatal(err)
	}
	w1 := interleaved(cl, func() {
		if _, err := c.Put(ctx, l.VersionKey(), strconv.Itoa(etcd.LayoutVersion)); err != nil {
			t.Error(err)
		}
	})
	if _, err := etcd.Apply(ctx, w1, l, "t", etcd.ScopeAll, objects(2, "4")); !errors.Is(err, etcd.ErrConflict) {
		t.Fatalf("an apply across a migration: %v", err)
	}
}
