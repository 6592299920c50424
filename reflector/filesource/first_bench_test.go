package filesource

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/steadystate/steadystate/reflector"
)

// BenchmarkFirstVersion measures what a start's first version costs the
// source past its decode: the diff (duplicates, key order) and the take
// of 50,000 routes, 10,000 rules and a sysctl in file order, for a List
// (the items the next version needs are made in the background, and
// waited for, so that both are counted).
func BenchmarkFirstVersion(b *testing.B) {
	var items []reflector.Item[int]
	items = append(items, reflector.Item[int]{Table: "sysctls", Key: "net.ipv4.ip_forward", Value: 1})
	for i := range 50_000 {
		items = append(items, reflector.Item[int]{Table: "routes", Key: fmt.Sprintf("254/10.%d.%d.0/24/0", i>>8, i&0xff), Value: i})
	}
	for i := range 10_000 {
		items = append(items, reflector.Item[int]{Table: "iptables-rules", Key: fmt.Sprintf("filter/INPUT/rule-%05d", i), Value: i})
	}
	for b.Loop() {
		s := &Source[int]{cfg: Config[int]{Path: "f", Metrics: NopMetrics{}, Logger: slog.New(slog.DiscardHandler)}}
		c, err := s.diff("f", items)
		if err != nil {
			b.Fatal(err)
		}
		s.take(items, c, false)
		s.mu.Lock()
		s.settle() // the items made in the background
		s.mu.Unlock()
	}
}
