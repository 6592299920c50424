package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/spf13/cobra"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/reflector"
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
}

// startPrefetch reads and decodes path in the background.
func startPrefetch[V any](path string, decode func(string, []byte) ([]reflector.Item[V], error)) *prefetch[V] {
	p := &prefetch[V]{path: path, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		data, err := readRegular(path)
		if err != nil {
			return // the source reads it and says why
		}
		p.data = data
		p.items, p.err = decode(path, data)
	}()
	return p
}

// take returns the prefetch's decode of data read from path, once: ok is
// false if the prefetch read another path or other bytes, or was taken
// already (the caller decodes then). It waits for the prefetch.
func (p *prefetch[V]) take(path string, data []byte) (items []reflector.Item[V], err error, ok bool) {
	if p == nil || p.path != path || p.taken {
		return nil, nil, false
	}
	<-p.done
	p.taken = true
	items, err = p.items, p.err
	same := p.data != nil && bytes.Equal(p.data, data)
	p.data, p.items, p.err = nil, nil, nil
	return items, err, same
}

// readRegular reads path if it is a regular file, without blocking on a
// FIFO put in its place.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	buf := bytes.NewBuffer(make([]byte, 0, info.Size()+bytes.MinRead))
	if _, err := io.Copy(buf, f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// prefetchFor starts the prefetch of the desired file that `agent run`
// with cmd's flags (or their environment variables) will read, as root in
// file mode; nil otherwise (fleet mode, no file, or an unprivileged agent,
// which runs again in a sandbox and reads the file there).
func prefetchFor(cmd *cobra.Command) *desiredPrefetch {
	if os.Geteuid() != 0 {
		return nil
	}
	value := func(name string) string {
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
	path := value("desired")
	if path == "" || strings.Trim(value("etcd-endpoints"), "[] ") != "" {
		return nil
	}
	return startPrefetch(path, prefetchDecode)
}

// prefetchWholeBelow is the largest file the prefetch decodes on one core:
// in two halves (decodeFileItems), it would take both cores from the
// hive's build, which has as much to do as a file of this size; a larger
// file, whose decode the start waits for anyway, is decoded in halves.
const prefetchWholeBelow = 2 << 20

// prefetchDecode is the prefetch's decodeFileItems.
func prefetchDecode(path string, data []byte) ([]reflector.Item[fileObject], error) {
	if len(data) < prefetchWholeBelow {
		return decodeWhole(path, data)
	}
	return decodeFileItems(path, data)
}
