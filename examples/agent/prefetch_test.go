package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/reflector"
	"golang.org/x/sys/unix"
)

// The first decode of the entry cache takes the prefetch's items when
// they were decoded from the same bytes, and only then: a file that
// changed between the prefetch and the source's read is decoded again,
// and so is an error's file; the prefetch is taken once.
func TestPrefetchTakenIfSame(t *testing.T) {
	first := restartDesired(2_000, 200)
	edited := bytes.Replace(first, []byte("prefix: 10.0.3.0/24\n"), []byte("prefix: 10.200.3.0/24\n"), 1)
	broken := bytes.Replace(first, []byte("type: blackhole\n"), []byte("type: blackhol\n"), 1)
	for _, c := range []struct {
		name        string
		prefetched  []byte // the file when prefetched
		read        []byte // when the source read it
		decodesWant int64  // whole decodes of the cache's own
	}{
		{"same", first, first, 0},
		{"changed in between", first, edited, 1},
		{"broken, the same", broken, broken, 0},
		{"broken in between", first, broken, 1},
	} {
		path := filepath.Join(t.TempDir(), "desired.yaml")
		if err := os.WriteFile(path, c.prefetched, 0o644); err != nil {
			t.Fatal(err)
		}
		var decodes atomic.Int64
		counting := func(path string, data []byte) ([]reflector.Item[fileObject], error) {
			decodes.Add(1)
			return decodeFileItems(path, data)
		}
		pre := startPrefetch(path, prefetchDecode)
		cache := newEntryCache(fileKeyList(), counting)
		cache.prefetch = pre
		got, err := cache.decode(path, c.read)
		want, wantErr := decodeFileItems(path, c.read)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !sameItems(got, want) {
			t.Errorf("%s: decoded %d items, %v; want %d, %v", c.name, len(got), err, len(want), wantErr)
		}
		if n := decodes.Load(); n != c.decodesWant {
			t.Errorf("%s: the cache decoded the file %d times itself, want %d", c.name, n, c.decodesWant)
		}
		if _, _, ok := pre.take(path, c.read); ok {
			t.Errorf("%s: the prefetch was taken twice", c.name)
		}
		cache.settle()
	}
	// Another path, none to read, or a FIFO in the file's place (not
	// waited on): not taken, and let go.
	dir := t.TempDir()
	path := filepath.Join(dir, "desired.yaml")
	os.WriteFile(path, first, 0o644)
	other := startPrefetch(path, prefetchDecode)
	if _, _, ok := other.take(path+".other", first); ok || other.items != nil || other.data != nil {
		t.Error("the prefetch of another path was taken, or kept")
	}
	if _, _, ok := startPrefetch(path+".missing", prefetchDecode).take(path+".missing", nil); ok {
		t.Error("the prefetch of a missing file was taken")
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := startPrefetch(fifo, prefetchDecode).take(fifo, nil); ok {
		t.Error("the prefetch of a FIFO was taken")
	}
	var none *desiredPrefetch
	if _, _, ok := none.take(path, first); ok {
		t.Error("no prefetch was taken")
	}
}

// prefetchFor reads the path `agent run` will read: the flag, else its
// environment variable; nothing in fleet mode.
func TestPrefetchFor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("prefetchFor prefetches as root only")
	}
	dir := t.TempDir()
	flagFile, envFile := filepath.Join(dir, "flag.yaml"), filepath.Join(dir, "env.yaml")
	os.WriteFile(flagFile, []byte("{}\n"), 0o644)
	os.WriteFile(envFile, []byte("{}\n"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" for no prefetch
	}{
		{"flag", []string{"--desired", flagFile}, nil, flagFile},
		{"environment", nil, map[string]string{"desired": envFile}, envFile},
		{"the flag over the environment", []string{"--desired", flagFile}, map[string]string{"desired": envFile}, flagFile},
		{"fleet mode", []string{"--desired", flagFile, "--etcd-endpoints", "127.0.0.1:2379"}, nil, ""},
		{"fleet mode from the environment", []string{"--desired", flagFile}, map[string]string{"etcd-endpoints": "127.0.0.1:2379"}, ""},
		{"no file", nil, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, flag := range []string{"desired", "etcd-endpoints"} {
				t.Setenv(hive.EnvName(envPrefix, flag), "")
				os.Unsetenv(hive.EnvName(envPrefix, flag))
			}
			for flag, v := range c.env {
				t.Setenv(hive.EnvName(envPrefix, flag), v)
			}
			cmd := runCommand()
			var got *desiredPrefetch
			cmd.RunE = func(c *cobra.Command, _ []string) error {
				got = prefetchFor(c)
				return nil
			}
			cmd.SetArgs(c.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			path := ""
			if got != nil {
				path = got.path
				<-got.done
			}
			if path != c.want {
				t.Errorf("prefetched %q, want %q", path, c.want)
			}
		})
	}
}

// A take that comes while the prefetch's decode is under way decodes the
// parts not begun yet itself, and gets the whole file's items: here the
// prefetch holds off until the take has begun every part.
func TestPrefetchTakeHelps(t *testing.T) {
	defer twoProcs()()
	data := restartDesired(10_000, 2_000)
	path := filepath.Join(t.TempDir(), "desired.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	offered := make(chan *partedDecode, 1)
	decode := func(path string, data []byte, offer func(work func())) ([]reflector.Item[fileObject], error) {
		d := newPartedDecode(path, data, partsFor(len(data)))
		if d == nil {
			return nil, fmt.Errorf("%d bytes not decoded in parts", len(data))
		}
		offer(d.work)
		offered <- d
		for deadline := time.Now().Add(time.Minute); int(d.next.Load()) < len(d.parts); {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the take began %d of %d parts", d.next.Load(), len(d.parts))
			}
			runtime.Gosched() // until the take began every part
		}
		d.work() // none left
		items, ok := d.result()
		if !ok {
			return nil, fmt.Errorf("the parts were not taken")
		}
		return items, nil
	}
	pre := startPrefetch(path, decode)
	d := <-offered
	if len(d.parts) < 2 {
		t.Fatalf("%d parts", len(d.parts))
	}
	got, err, ok := pre.take(path, data)
	want, wantErr := decodeWhole(path, data)
	if !ok || err != nil || wantErr != nil || !sameItems(got, want) {
		t.Fatalf("take: %d items, %v, taken %v; the whole decode: %d items, %v", len(got), err, ok, len(want), wantErr)
	}
}
