package etcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"
)

// ErrNotWatching is wrapped by RequestProgress's error when the source has
// no watch running (before the reflector's first watch, or between a lost
// watch and the next).
var ErrNotWatching = errors.New("no watch running")

// ErrProgressUnsupported is wrapped by RequestProgress's error when the
// etcd servers cannot be asked for progress safely. Before etcd 3.4.25 and
// 3.5.8 a requested progress notification may overtake the events before
// it (etcd issue 15220: Debian's 3.4.23 sends it at once, before the events
// of a watch that is catching up), so the reflector's Revision would claim
// changes it does not hold yet; until 3.4.31 and 3.5.13 a request may go
// unanswered for good (etcd issue 17507). It is also the error while no
// server has told its version yet (List asks each endpoint once).
var ErrProgressUnsupported = errors.New("requested progress notifications are unsafe or unknown with these etcd servers")

// RequestProgress asks etcd to send this source's watch a progress
// notification now: the reflector's Revision then reaches etcd's revision
// at the time of the answer, once the events before it are committed
// (within about a millisecond on loopback when nothing is pending). A node
// does not need it to reach its desired state's revision (the watch sends
// a Progress after each change of it); call it when Revision must follow
// writes to the cluster that are not this node's desired state.
//
// The request goes to the gRPC stream of the source's watch, which it has
// to itself: etcd answers a request for every watch of a stream at once,
// and only if each of them has caught up with etcd's revision and did not
// start beyond it. A watch that starts right after its list, with nothing
// written since, starts one beyond; on a stream shared by the sources of
// several tables it would silence all of them until the next write
// anywhere in the cluster. A request that etcd does not answer (this
// watch is catching up, just after a relist or under a burst of writes)
// is dropped, not deferred: if the revision did not move, ask again later.
//
// Errors: ErrNotWatching, ErrProgressUnsupported, or the client's (ctx
// ended, client closed).
func (s *Source) RequestProgress(ctx context.Context) error {
	s.mu.Lock()
	md, watching := s.metadata, s.watches > 0
	err := s.progressSafeLocked()
	s.mu.Unlock()
	switch {
	case !watching:
		return fmt.Errorf("etcd source of %s for %s: %w", strings.Join(s.tables, ","), s.node, ErrNotWatching)
	case err != nil:
		return fmt.Errorf("etcd source of %s for %s: %w", strings.Join(s.tables, ","), s.node, err)
	}
	if err := s.client.RequestProgress(metadata.NewOutgoingContext(ctx, md)); err != nil {
		return fmt.Errorf("etcd source of %s for %s: requesting progress: %w", strings.Join(s.tables, ","), s.node, err)
	}
	return nil
}

// learnVersions asks each endpoint of the client whose server version is
// not known yet for it, at once, within RequestTimeout; one that does not
// answer is asked again at the next List.
func (s *Source) learnVersions(ctx context.Context) {
	s.mu.Lock()
	var ask []string
	for _, ep := range s.client.Endpoints() {
		if _, ok := s.servers[ep]; !ok {
			ask = append(ask, ep)
		}
	}
	s.mu.Unlock()
	if len(ask) == 0 {
		return
	}
	versions := make([]string, len(ask))
	var wg sync.WaitGroup
	for i, ep := range ask {
		wg.Go(func() {
			rctx, cancel := s.request(ctx)
			defer cancel()
			if st, err := s.client.Status(rctx, ep); err == nil {
				versions[i] = st.Version
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = map[string]string{}
	}
	for i, ep := range ask {
		if versions[i] != "" {
			s.servers[ep] = versions[i]
		}
	}
}

// progressSafeLocked returns nil if progress may be requested: at least
// one server told its version, and every one that did orders requested
// progress notifications after the events before them.
func (s *Source) progressSafeLocked() error {
	if len(s.servers) == 0 {
		return fmt.Errorf("%w: no etcd server told its version yet", ErrProgressUnsupported)
	}
	for _, ep := range slices.Sorted(maps.Keys(s.servers)) {
		if v := s.servers[ep]; !orderedProgress(v) {
			return fmt.Errorf("%w: etcd %s at %s (3.4.31, 3.5.13, 3.6 and later are safe)", ErrProgressUnsupported, v, ep)
		}
	}
	return nil
}

// orderedProgress tells whether etcd server version v sends a requested
// progress notification after the events before it, and answers a request
// once the watches caught up even without a new event: 3.4.31, 3.5.13,
// 3.6.0 and later (the versions Kubernetes requires for the same use).
func orderedProgress(v string) bool {
	var major, minor, patch int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); n < 3 {
		return false
	}
	switch {
	case major != 3:
		return major > 3
	case minor == 4:
		return patch >= 31
	case minor == 5:
		return patch >= 13
	}
	return minor >= 6
}
