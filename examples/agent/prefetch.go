package main

import (
	"bytes"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/cobra"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/reflector/filesource"
)

// A start of `agent run` builds its hive (4-5 ms of dig's reflection) and
// starts it (the state record opened, the status API's socket, the sweep
// of dead agents' leftovers) before the file source reads the desired file
// for its first List, and that decode was the start's longest step but
// one. desiredPrefetch reads and decodes the file on the other core
// meanwhile, from before the hive is built, and the first decode of the
// file source takes its result if the source read the very same bytes:
// the decode is a function of the file's path and bytes, so what the
// source sees is what it would have decoded itself. A file that changed
// in between is decoded again, as without the prefetch.

// desiredPrefetch is the prefetch of the agent's desired file.
type desiredPrefetch = prefetch[fileObject]

// prefetch is a read and decode of a file begun before the hive exists.
type prefetch[V any] struct {
	path  string
	done  chan struct{} // closed once data, items and err are set
	data  []byte        // nil if the read failed
	items []reflector.Item[V]
	err   error
	taken bool
	// help, once the decode offers it, decodes on the caller's goroutine
	// what the decode has not begun yet (see take).
	help atomic.Pointer[prefetchHelp]
}

// prefetchHelp is what a decode offers to do on another goroutine: work,
// a decode of parts of data.
type prefetchHelp struct {
	data []byte
	work func()
}

// prefetchDecoder decodes a file read from path; it may offer work that
// another goroutine can help with (offer).
type prefetchDecoder[V any] func(path string, data []byte, offer func(work func())) ([]reflector.Item[V], error)

// startPrefetch reads and decodes path in the background.
func startPrefetch[V any](path string, decode prefetchDecoder[V]) *prefetch[V] {
	p := &prefetch[V]{path: path, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		data, err := filesource.ReadFile(path)
		if err != nil {
			return // the source reads it and says why
		}
		p.data = data
		p.items, p.err = decode(path, data, func(work func()) {
			p.help.Store(&prefetchHelp{data: data, work: work})
		})
		p.help.Store(nil) // the decode and its parts go with the result

	}()
	return p
}

// take returns the prefetch's decode of data read from path, once: ok is
// false if the prefetch read another path or other bytes, or was taken
// already (the caller decodes then). It waits for the prefetch, and lets
// its result go either way.
func (p *prefetch[V]) take(path string, data []byte) (items []reflector.Item[V], err error, ok bool) {
	if p == nil || p.taken {
		return nil, nil, false
	}
	if h := p.help.Load(); h != nil && p.path == path && bytes.Equal(h.data, data) {
		// The decode is under way: take the parts it has not begun
		// rather than wait for them, on a core that would be idle.
		h.work()
	}
	<-p.done
	p.taken = true
	items, err = p.items, p.err
	same := p.path == path && p.data != nil && bytes.Equal(p.data, data)
	p.data, p.items, p.err = nil, nil, nil // taken or not, let go
	return items, err, same
}

// prefetchFor starts the prefetch of the desired file that `agent run`
// with cmd's flags (or their environment variables) will read, as root in
// file mode; nil otherwise (fleet mode, no file, or an unprivileged agent,
// which runs again in a sandbox and reads the file there).
func prefetchFor(cmd *cobra.Command) *desiredPrefetch {
	if os.Geteuid() != 0 {
		return nil
	}
	path := runFlag(cmd, "desired")
	if path == "" || strings.Trim(runFlag(cmd, "etcd-endpoints"), "[] ") != "" {
		return nil
	}
	return startPrefetch(path, prefetchDecode)
}

// runFlag is the value `agent run` will take for flag name before its
// hive reads it: the command line's, else its environment variable's (as
// the hive applies them), else the default.
func runFlag(cmd *cobra.Command, name string) string {
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return ""
	}
	if !f.Changed {
		if v, ok := os.LookupEnv(hive.EnvName(envPrefix, name)); ok {
			return v
		}
	}
	return f.Value.String()
}

// prefetchHelpBelow is the largest file whose prefetch decodes its parts
// on one goroutine until the file source helps (see take): the hive's
// build, on the other core meanwhile, has as much to do as a file of this
// size (two goroutines from the start took both cores from it, and the
// reflector ran 6 ms after the hive had started). A larger file, whose
// decode the start waits for anyway, is decoded on two from the start.
const prefetchHelpBelow = 2 << 20

// prefetchDecode is the prefetch's decodeFileItems: in parts (see
// partedDecode), which the file source takes its share of when it asks
// for the result before it is ready.
func prefetchDecode(path string, data []byte, offer func(work func())) ([]reflector.Item[fileObject], error) {
	d := newPartedDecode(path, data, partsFor(len(data)))
	if d == nil {
		return decodeWhole(path, data)
	}
	offer(d.work)
	if len(data) >= prefetchHelpBelow {
		go d.work()
	}
	d.work()
	if items, ok := d.result(); ok {
		return items, nil
	}
	return decodeWhole(path, data)
}
