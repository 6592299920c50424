package cilium

import (
	"iter"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"

	cstatedb "github.com/cilium/statedb"
	cindex "github.com/cilium/statedb/index"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// The longest-prefix-match shapes: a table of routes with a primary index
// by ID and a non-unique LPM index by prefix (steadystate: statedb.LPMIndex;
// cilium: statedb.NetIPPrefixIndex), filled with N distinct random IPv4
// prefixes whose lengths follow an Internet routing table: half /24, a
// fifth /16-/23, a fifth /25-/32, a tenth /8-/15.
//
//   - LPMInsert/prefixes=N: a new table per op (made with the timer
//     stopped), then N routes inserted in committed transactions of 1000.
//   - LPMLookup/prefixes=N: a filled table; per op, 1000 addresses (each
//     inside a random stored prefix, so that every lookup finds a route)
//     looked up by Get on the LPM index from one snapshot, the query built
//     in the loop as a caller with an address does.
//
// N is 1k, 10k, 100k and 1M; with -short 1k and 10k.

// route is what both sides store, by pointer.
type route struct {
	ID     uint64
	Prefix netip.Prefix
}

// TableHeader and TableRow make route storable in cilium's tables.
func (r *route) TableHeader() []string { return []string{"ID", "Prefix"} }
func (r *route) TableRow() []string {
	return []string{strconv.FormatUint(r.ID, 10), r.Prefix.String()}
}

// lpmSizes are the table sizes of the LPM shapes.
func lpmSizes() []int {
	if testing.Short() {
		return []int{1_000, 10_000}
	}
	return []int{1_000, 10_000, 100_000, 1_000_000}
}

// lpmBatch is the number of routes per write transaction of LPMInsert.
const lpmBatch = 1000

// lpmLookups is the number of addresses looked up per op of LPMLookup.
const lpmLookups = 1000

// lpmRoutes returns n routes with distinct random IPv4 prefixes (see above),
// fixed by n.
func lpmRoutes(n int) []*route {
	r := rand.New(rand.NewPCG(uint64(n), 15))
	seen := make(map[netip.Prefix]bool, n)
	out := make([]*route, 0, n)
	for len(out) < n {
		var bits int
		switch x := r.IntN(10); {
		case x < 5:
			bits = 24
		case x < 7:
			bits = 16 + r.IntN(8)
		case x < 9:
			bits = 25 + r.IntN(8)
		default:
			bits = 8 + r.IntN(8)
		}
		var a [4]byte
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		p := netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, &route{ID: uint64(len(out)), Prefix: p})
		}
	}
	return out
}

// lpmAddrs returns n addresses, each inside a random prefix of routes.
func lpmAddrs(routes []*route, n int) []netip.Addr {
	r := rand.New(rand.NewPCG(uint64(len(routes)), 16))
	out := make([]netip.Addr, n)
	for i := range out {
		p := routes[r.IntN(len(routes))].Prefix
		a := p.Addr().As4()
		host := r.Uint32() >> p.Bits() // bits below the prefix length
		if p.Bits() == 32 {
			host = 0
		}
		v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
		out[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return out
}

// BenchmarkLPMInsert inserts N routes into a new table per op, in
// transactions of 1000.
func BenchmarkLPMInsert(b *testing.B) {
	for _, n := range lpmSizes() {
		routes := lpmRoutes(n)
		b.Run("prefixes="+strconv.Itoa(n), func(b *testing.B) {
			pair(b, newSSLPM, newCiliumLPM, func(b *testing.B, s lpmSide) {
				inserted := 0
				for b.Loop() {
					b.StopTimer()
					s.reset(b)
					b.StartTimer()
					s.insert(routes)
					inserted += len(routes)
				}
				reportObjectsPerSec(b, inserted)
			})
		})
	}
}

// BenchmarkLPMLookup looks up 1000 addresses per op by longest-prefix
// match in a table of N routes.
func BenchmarkLPMLookup(b *testing.B) {
	for _, n := range lpmSizes() {
		routes := lpmRoutes(n)
		addrs := lpmAddrs(routes, lpmLookups)
		b.Run("prefixes="+strconv.Itoa(n), func(b *testing.B) {
			newSS := func(tb testing.TB) lpmSide { s := newSSLPM(tb); s.insert(routes); return s }
			newCilium := func(tb testing.TB) lpmSide { c := newCiliumLPM(tb); c.insert(routes); return c }
			pair(b, newSS, newCilium, func(b *testing.B, s lpmSide) {
				looked := 0
				for b.Loop() {
					if got := s.lookup(addrs); got != len(addrs) {
						b.Fatalf("found a route for %d of %d addresses", got, len(addrs))
					}
					looked += len(addrs)
				}
				reportObjectsPerSec(b, looked)
			})
		})
	}
}

// lpmSide is a side of the LPM shapes: one table of routes.
type lpmSide interface {
	// reset replaces the table with a new, empty one.
	reset(tb testing.TB)
	// insert writes the routes in committed transactions of lpmBatch.
	insert(routes []*route)
	// lookup gets the route of each address from one snapshot and returns
	// how many it found.
	lookup(addrs []netip.Addr) int
	// find returns the prefix of the route of a.
	find(a netip.Addr) (netip.Prefix, bool)
}

// TestLPMSidesAgree checks that both sides find the same route for every
// address of the lookup shape, and the longest one (against a scan), so
// that the pair measures the same work.
func TestLPMSidesAgree(t *testing.T) {
	routes := lpmRoutes(2000)
	addrs := lpmAddrs(routes, 500)
	addrs = append(addrs, netip.MustParseAddr("0.0.0.1"), netip.MustParseAddr("255.255.255.255"))
	ss, ci := newSSLPM(t), newCiliumLPM(t)
	ss.insert(routes)
	ci.insert(routes)
	for _, a := range addrs {
		var want netip.Prefix
		for _, r := range routes {
			if r.Prefix.Contains(a) && r.Prefix.Bits() > want.Bits() {
				want = r.Prefix
			}
		}
		sp, sok := ss.find(a)
		cp, cok := ci.find(a)
		if sok != want.IsValid() || sp != want || cok != sok || cp != sp {
			t.Fatalf("%v: steadystate %v %v, cilium %v %v, want %v", a, sp, sok, cp, cok, want)
		}
	}
}

var (
	ssRouteID = statedb.Index[*route, uint64]{
		Name:       "id",
		FromObject: func(r *route) index.KeySet { return index.NewKeySet(index.Uint64(r.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	ssRoutePrefix = statedb.LPMIndex[*route]{
		Name:       "prefix",
		FromObject: func(r *route) []netip.Prefix { return []netip.Prefix{r.Prefix} },
	}
	ciRouteID = cstatedb.Index[*route, uint64]{
		Name:       "id",
		FromObject: func(r *route) cindex.KeySet { return cindex.NewKeySet(cindex.Uint64(r.ID)) },
		FromKey:    cindex.Uint64,
		Unique:     true,
	}
	ciRoutePrefix = cstatedb.NetIPPrefixIndex[*route]{
		Name:       "prefix",
		FromObject: func(r *route) iter.Seq[netip.Prefix] { return cstatedb.Just(r.Prefix) },
	}
)

type ssLPM struct {
	db  *statedb.DB
	tbl statedb.RWTable[*route]
}

func newSSLPM(tb testing.TB) lpmSide {
	s := &ssLPM{}
	s.reset(tb)
	return s
}

func (s *ssLPM) reset(tb testing.TB) {
	s.db = statedb.New()
	tbl, err := statedb.NewTable(s.db, "routes", ssRouteID, ssRoutePrefix)
	if err != nil {
		tb.Fatal(err)
	}
	s.tbl = tbl
}

func (s *ssLPM) insert(routes []*route) {
	for len(routes) > 0 {
		batch := routes[:min(lpmBatch, len(routes))]
		routes = routes[len(batch):]
		wtxn := s.db.WriteTxn(s.tbl)
		for _, r := range batch {
			_, _, err := s.tbl.Insert(wtxn, r)
			must(err)
		}
		wtxn.Commit()
	}
}

func (s *ssLPM) lookup(addrs []netip.Addr) int {
	txn := s.db.ReadTxn()
	found := 0
	for _, a := range addrs {
		if _, _, ok := s.tbl.Get(txn, ssRoutePrefix.Query(a)); ok {
			found++
		}
	}
	return found
}

func (s *ssLPM) find(a netip.Addr) (netip.Prefix, bool) {
	r, _, ok := s.tbl.Get(s.db.ReadTxn(), ssRoutePrefix.Query(a))
	if !ok {
		return netip.Prefix{}, false
	}
	return r.Prefix, true
}

// ciLPM is the cilium side. Its databases are not started: the shapes
// delete nothing, so its graveyard worker would have nothing to do.
type ciLPM struct {
	db  *cstatedb.DB
	tbl cstatedb.RWTable[*route]
}

func newCiliumLPM(tb testing.TB) lpmSide {
	c := &ciLPM{}
	c.reset(tb)
	return c
}

func (c *ciLPM) reset(tb testing.TB) {
	c.db = cstatedb.New(cstatedb.WithMetrics(&cstatedb.NopMetrics{}))
	tbl, err := cstatedb.NewTable(c.db, "routes", ciRouteID, ciRoutePrefix)
	if err != nil {
		tb.Fatal(err)
	}
	c.tbl = tbl
}

func (c *ciLPM) insert(routes []*route) {
	for len(routes) > 0 {
		batch := routes[:min(lpmBatch, len(routes))]
		routes = routes[len(batch):]
		wtxn := c.db.WriteTxn(c.tbl)
		for _, r := range batch {
			_, _, err := c.tbl.Insert(wtxn, r)
			must(err)
		}
		wtxn.Commit()
	}
}

func (c *ciLPM) lookup(addrs []netip.Addr) int {
	txn := c.db.ReadTxn()
	found := 0
	for _, a := range addrs {
		if _, _, ok := c.tbl.Get(txn, ciRoutePrefix.Query(a)); ok {
			found++
		}
	}
	return found
}

func (c *ciLPM) find(a netip.Addr) (netip.Prefix, bool) {
	r, _, ok := c.tbl.Get(c.db.ReadTxn(), ciRoutePrefix.Query(a))
	if !ok {
		return netip.Prefix{}, false
	}
	return r.Prefix, true
}
