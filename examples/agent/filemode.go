package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/reflector/filesource"
	"github.com/steadystate/steadystate/reflector/reflectorcell"
)

// File mode (--desired): the desired-state file is a reflector source
// (package filesource, which reads only whole files: see its doc), decoded
// and validated with the kinds into each object under its name in fleet
// mode's codec (fileObject: the decoded object itself, not its JSON), and
// the agent's one reflector commits each new version of the file to the
// three tables at once, as in fleet mode. A file that does not decode or validate is
// reported (the log, the health scope "desired-file", the metrics) and
// changes nothing; nothing is pruned before the first good version. An
// edit of a large file decodes only the entries it changed (entryCache,
// in filecache.go), with the whole file's result and errors.

// fileModeCells are file mode's part of the agent; the hive builds them
// only with --desired.
var fileModeCells = cell.Module("desired", "Desired state from the file",
	cell.Provide(newFileSource),
	cell.Invoke(startFileMode),
)

// fileParams are what file mode takes from the hive.
type fileParams struct {
	cell.In

	Config     AgentConfig
	Reflect    reflectorcell.Params
	Kinds      kindsIn
	Health     cell.Health
	Log        *slog.Logger
	Registerer prometheus.Registerer
	FirstLoad  *firstLoad
	Notify     *notifier
	// Rounds, if set, is the agent's first readiness: the work the
	// first version leaves for the next waits for it.
	Rounds *firstRounds `optional:"true"`
	// Prefetch, if set, is the first decode begun before the hive was
	// built (`agent run`): the first version takes it if it read the same.
	Prefetch *desiredPrefetch `optional:"true"`
}

// newFileSource makes the file's source and the reflector of the three
// tables it feeds (which registers each table's initializer, done with the
// first good version), and a job that closes firstLoad then (/readyz).
//
// Without --desired (nor --etcd-endpoints) there is nothing to read: nil,
// so that `agent run cells` works and `agent run` says what is missing.
func newFileSource(p fileParams) (*filesource.Source[fileObject], error) {
	if p.Config.Desired == "" {
		return nil, nil
	}
	m, err := newLoaderMetrics(p.Registerer)
	if err != nil {
		return nil, err
	}
	// What the first version leaves for the next (the file source's map
	// of it, the edit cache, the reflector's maps) waits until the agent
	// is ready, or stops.
	var idle chan struct{} // nil without Rounds: at once
	if p.Rounds != nil {
		idle = make(chan struct{})
		if err := p.Reflect.Jobs.Add(job.OneShot("idle-after-start", func(ctx context.Context, _ cell.Health) error {
			select {
			case <-p.Rounds.Done():
			case <-ctx.Done():
			}
			close(idle)
			return nil
		})); err != nil {
			return nil, err
		}
	}
	cache := newEntryCache(fileKeyList(), decodeFileItems)
	cache.idle = idle
	cache.prefetch = p.Prefetch
	src, err := filesource.New(filesource.Config[fileObject]{
		Path:   p.Config.Desired,
		Decode: cache.decode,
		Idle:   idle,
		Equal:  fileObject.equal,
		// 0 is "read at once" for the agent, the default for the source.
		SettleTime:   max(p.Config.SettleTime, time.Nanosecond),
		PollInterval: p.Config.ReloadInterval,
		// Its loads and rejections are also the agent's STATUS to systemd.
		Health:    notifyHealth{Health: p.Health.NewScope("desired-file"), n: p.Notify},
		Metrics:   m,
		Logger:    p.Log,
		EmptyHint: "write `{}` to remove all desired state",
	})
	if err != nil {
		return nil, err
	}
	var specs []reflector.TableSpec[fileObject]
	for _, k := range p.Kinds.sorted() {
		specs = append(specs, k.into)
	}
	multi, err := reflectorcell.RegisterMulti(p.Reflect, reflector.MultiConfig[fileObject]{Name: "desired", Source: src, Tables: specs, Idle: idle})
	if err != nil {
		return nil, err
	}
	return src, p.Reflect.Jobs.Add(job.OneShot("first-load", func(ctx context.Context, _ cell.Health) error {
		for {
			rev, moved := multi.RevisionWatch()
			if rev > 0 {
				p.FirstLoad.close()
				return nil
			}
			select {
			case <-moved:
			case <-ctx.Done():
				return nil
			}
		}
	}))
}

// startFileMode makes the hive build file mode's part.
func startFileMode(*filesource.Source[fileObject]) {}

// fileObject is a desired object of the file (a *routes.Route, say),
// decoded and validated: what the file source keeps of a version and the
// reflector's transform takes (fileTransform). Unlike fleet mode, whose
// values are JSON in etcd, file mode needs no codec between the two: at
// 60,000 objects encoding each at every start, only for the reflector to
// decode it again, was a fifth of a start's time.
type fileObject struct{ obj any }

// equal is the file source's Equal: the same desired object (status
// aside), telling which keys a new version of the file changed.
func (a fileObject) equal(b fileObject) bool {
	for _, k := range kinds {
		if eq, ok := k.same(a.obj, b.obj); ok {
			return eq
		}
	}
	return false
}

// decodeFileItems is the source's decode: the file decoded and validated
// as `fleet apply` does, then each object under its name in the codec
// both modes share, by table. A large file of the block shape is decoded
// in parts on two goroutines (decodeSplit), with the same result.
func decodeFileItems(path string, data []byte) ([]reflector.Item[fileObject], error) {
	if items, ok := decodeSplit(path, data); ok {
		return items, nil
	}
	return decodeWhole(path, data)
}

// decodeWhole is decodeFileItems in one piece.
func decodeWhole(path string, data []byte) ([]reflector.Item[fileObject], error) {
	f, err := decodeDesired(path, data)
	var names map[string][]string
	if err == nil {
		names, err = validateDesired(path, f)
	}
	if err != nil {
		return nil, err
	}
	n := 0
	for _, k := range kinds {
		n += len(f.of(k))
	}
	items := make([]reflector.Item[fileObject], 0, n)
	for _, k := range kinds {
		kn := names[k.fileKey()]
		for i, obj := range f.of(k) {
			items = append(items, reflector.Item[fileObject]{Table: k.tableName(), Key: kn[i], Value: fileObject{obj}})
		}
	}
	return items, nil
}

// validateDesired validates every entry of a decoded desired file (read
// from path) and finds duplicates: file mode's check, and `fleet apply`'s.
// With no error, it returns each entry's name, by kind's file key.
func validateDesired(path string, f *desiredFile) (map[string][]string, error) {
	var errs []error
	names := make(map[string][]string, len(kinds))
	for _, k := range kinds {
		kn, kerrs := k.validate(f.of(k), f.lines[k.fileKey()])
		names[k.fileKey()] = kn
		errs = append(errs, kerrs...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	return names, nil
}

// firstLoad closes its channel once the desired state was committed to the
// tables for the first time (a good version of the file, or the first
// list from etcd). It is a value of its own, so that the status API depends
// on it and not on either mode.
type firstLoad struct {
	done chan struct{}
	once sync.Once
}

func newFirstLoad() *firstLoad { return &firstLoad{done: make(chan struct{})} }

// Done returns the channel.
func (f *firstLoad) Done() <-chan struct{} { return f.done }

// close closes the channel (again: no effect).
func (f *firstLoad) close() { f.once.Do(func() { close(f.done) }) }

// Loaded, Rejected and Deferred make the agent's metrics the file
// source's (filesource.Metrics).
func (m *loaderMetrics) Loaded(string, int, int) {
	m.loads.WithLabelValues(loadApplied).Inc()
	m.lastApplied.SetToCurrentTime()
}

func (m *loaderMetrics) Rejected(string) { m.loads.WithLabelValues(loadRejected).Inc() }
func (m *loaderMetrics) Deferred(string) { m.deferred.Inc() }

var _ filesource.Metrics = (*loaderMetrics)(nil)
