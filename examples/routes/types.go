package routes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
)

// The route types a Route may have. The empty string is a unicast route.
const (
	TypeUnicast     = ""
	TypeBlackhole   = "blackhole"
	TypeUnreachable = "unreachable"
	TypeProhibit    = "prohibit"
)

// Kernel routing tables with a meaning of their own.
const (
	// MainTable is the table that Table 0 stands for (RT_TABLE_MAIN).
	MainTable = 254
	// LocalTable (RT_TABLE_LOCAL) holds the kernel's local and broadcast
	// routes; a Route may not name it.
	LocalTable = 255
)

// DefaultIPv6Metric is the metric the kernel gives an IPv6 route added with
// metric 0 (IP6_RT_PRIO_USER). An IPv6 Route with Metric 0 therefore has
// metric 1024 in the kernel, in its key and in `ip -6 route`.
const DefaultIPv6Metric = 1024

// Route is one desired route. Its identity (see Key) is what the kernel
// identifies a route by: the table, the prefix and the metric. Two Routes
// with the same identity are the same route in the kernel, so they are one
// object in the table.
//
// A Route is immutable once inserted into a table: clone it, change the
// clone, insert the clone.
type Route struct {
	// Prefix is the destination, such as 10.0.0.0/8 or 2001:db8::/32. It
	// must be masked (no host bits set): 10.1.2.3/8 is rejected rather
	// than silently read as 10.0.0.0/8, because a desired-state file that
	// says one thing and means another is a bug worth reporting.
	Prefix netip.Prefix `json:"prefix" yaml:"prefix"`
	// Via is the next hop (gateway), optional. Its family must be the
	// prefix's. An IPv6 link-local next hop needs Dev. (No omitempty for
	// YAML: yaml/v3 would judge every netip.Addr empty and drop it.)
	Via netip.Addr `json:"via,omitzero" yaml:"via"`
	// Dev is the name of the outgoing device, optional.
	Dev string `json:"dev,omitempty" yaml:"dev,omitempty"`
	// Type is "" (unicast), "blackhole", "unreachable" or "prohibit". A
	// unicast route needs Via or Dev; the others take neither.
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Table is the routing table, 1 to 2^32-1 except 255 (local); 0 means
	// the main table (254).
	Table int `json:"table,omitempty" yaml:"table,omitempty"`
	// Metric is the route's priority, 0 to 2^32-1; lower wins. For IPv6
	// the kernel stores 0 as DefaultIPv6Metric (1024).
	Metric int `json:"metric,omitempty" yaml:"metric,omitempty"`
	// Status is the reconciliation status, written by the reconciler.
	Status reconciler.Status `json:"status" yaml:"status"`
}

// Clone returns a shallow copy of r (all fields are values, so it is a full
// copy).
func (r *Route) Clone() *Route {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// GetStatus returns r's reconciliation status.
func (r *Route) GetStatus() reconciler.Status { return r.Status }

// SetStatus sets r's status and returns r. Call it only on an object that
// is not stored yet (a clone).
func (r *Route) SetStatus(s reconciler.Status) *Route {
	r.Status = s
	return r
}

// Equal reports whether r and o describe the same desired route, field by
// field as written (Table 0 and Table 254 differ here, although they name
// the same table). The status is ignored.
func (r *Route) Equal(o *Route) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.Prefix == o.Prefix && r.Via == o.Via && r.Dev == o.Dev &&
		r.Type == o.Type && r.Table == o.Table && r.Metric == o.Metric
}

// Key returns r's identity in the kernel: its table (0 read as 254), prefix
// and metric (0 read as 1024 for IPv6). It is what the primary index holds.
func (r *Route) Key() RouteKey {
	return RouteKey{Table: effectiveTable(r.Table), Prefix: r.Prefix, Metric: effectiveMetric(r.Prefix, r.Metric)}
}

// ErrInvalidRoute is wrapped by every error of Route.Validate.
var ErrInvalidRoute = errors.New("invalid route")

// Validate checks r and returns an error that wraps ErrInvalidRoute and
// names every field in trouble, or nil. The target reports a Route that
// fails Validate as a terminal error: retrying cannot fix it.
func (r *Route) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	p := r.Prefix
	switch {
	case !p.IsValid():
		bad("prefix is missing or invalid (want a CIDR such as 10.0.0.0/8)")
	case p.Addr().Zone() != "":
		bad("prefix %s must not have a zone", p)
	case p.Masked() != p:
		bad("prefix %s has host bits set (did you mean %s?)", p, p.Masked())
	}

	switch r.Type {
	case TypeUnicast:
		if !r.Via.IsValid() && r.Dev == "" {
			bad("a unicast route needs via or dev")
		}
	case TypeBlackhole, TypeUnreachable, TypeProhibit:
		if r.Via.IsValid() {
			bad("via %s is not allowed with type %q", r.Via, r.Type)
		}
		if r.Dev != "" {
			bad("dev %q is not allowed with type %q", r.Dev, r.Type)
		}
	default:
		bad("type %q is unknown (want \"\" for unicast, %q, %q or %q)", r.Type, TypeBlackhole, TypeUnreachable, TypeProhibit)
	}

	if v := r.Via; v.IsValid() {
		switch {
		case v.Zone() != "":
			bad("via %s must not have a zone (name the device in dev)", v)
		case v.IsUnspecified():
			bad("via %s is the unspecified address (leave via out for a route without a next hop)", v)
		case p.IsValid() && v.Is4() != p.Addr().Is4():
			bad("via %s is not of the prefix's address family", v)
		case v.Is6() && v.IsLinkLocalUnicast() && r.Dev == "":
			bad("via %s is link-local and needs dev", v)
		}
	}
	if r.Dev != "" {
		if err := validDevName(r.Dev); err != nil {
			bad("dev %q %v", r.Dev, err)
		}
	}

	switch {
	case r.Table < 0 || r.Table > math.MaxUint32:
		bad("table %d is out of range (0 for main, or 1 to %d)", r.Table, uint32(math.MaxUint32))
	case r.Table == LocalTable:
		bad("table %d (local) belongs to the kernel", r.Table)
	}
	if r.Metric < 0 || r.Metric > math.MaxUint32 {
		bad("metric %d is out of range (0 to %d)", r.Metric, uint32(math.MaxUint32))
	}

	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s: %w", ErrInvalidRoute, r.Prefix, errors.Join(errs...))
}

// validDevName applies the kernel's rules for interface names
// (dev_valid_name): 1 to 15 bytes, not "." or "..", no '/', ':' or space.
func validDevName(name string) error {
	switch {
	case len(name) > 15:
		return errors.New("is longer than 15 bytes")
	case name == "." || name == "..":
		return errors.New("is not a device name")
	case strings.ContainsAny(name, "/: \t\n\r\v\f"):
		return errors.New("must not contain '/', ':' or white space")
	}
	return nil
}

// String formats r the way `ip route` does, for logs and errors:
// "blackhole 10.0.0.0/8 table 100 metric 5".
func (r *Route) String() string {
	var b strings.Builder
	if r.Type != TypeUnicast {
		b.WriteString(r.Type)
		b.WriteByte(' ')
	}
	b.WriteString(r.Prefix.String())
	if r.Via.IsValid() {
		b.WriteString(" via ")
		b.WriteString(r.Via.String())
	}
	if r.Dev != "" {
		b.WriteString(" dev ")
		b.WriteString(r.Dev)
	}
	if r.Table != 0 {
		b.WriteString(" table ")
		b.WriteString(strconv.Itoa(r.Table))
	}
	if r.Metric != 0 {
		b.WriteString(" metric ")
		b.WriteString(strconv.Itoa(r.Metric))
	}
	return b.String()
}

// effectiveTable is the table the kernel uses for table t.
func effectiveTable(t int) uint32 {
	if t == 0 {
		return MainTable
	}
	return uint32(t)
}

// effectiveMetric is the metric the kernel gives a route to p with metric m.
func effectiveMetric(p netip.Prefix, m int) uint32 {
	if m == 0 && p.Addr().Is6() {
		return DefaultIPv6Metric
	}
	return uint32(m)
}

// RouteKey is a route's identity in the kernel: no two routes of one table
// share a prefix and a metric. (IPv4 also keys on TOS, which Route does not
// set: it is always 0.)
type RouteKey struct {
	// Table is the routing table; 254 is main.
	Table uint32
	// Prefix is the destination, masked.
	Prefix netip.Prefix
	// Metric is the metric as the kernel stores it (1024 for an IPv6 route
	// given 0).
	Metric uint32
}

// NewRouteKey returns the key of a route in table t (0 for main) to p with
// metric m (0 stands for 1024 with IPv6), read as Route.Key reads them.
func NewRouteKey(t uint32, p netip.Prefix, m uint32) RouteKey {
	if t == 0 {
		t = MainTable
	}
	if m == 0 && p.Addr().Is6() {
		m = DefaultIPv6Metric
	}
	return RouteKey{Table: t, Prefix: p, Metric: m}
}

// Encode returns k as an index key: the table (index.Uint32), the prefix
// (index.NetIPPrefix) and the metric (index.Uint32), concatenated. The
// prefix's first byte gives its family and thereby its length, so the parts
// never run into each other and byte order is the order of (table, family,
// address, prefix length, metric).
func (k RouteKey) Encode() index.Key {
	// One allocation: binary.BigEndian is index.Uint32's encoding (the
	// fuzz test holds the two to the same bytes).
	key := make(index.Key, 0, 4+1+16+1+4)
	key = binary.BigEndian.AppendUint32(key, k.Table)
	key = index.AppendNetIPPrefix(key, k.Prefix)
	return binary.BigEndian.AppendUint32(key, k.Metric)
}

// String returns k in the text form that ParseRouteKey reads:
// TABLE/PREFIX/METRIC, such as "254/10.0.0.0/8/0" or
// "100/2001:db8::/32/1024".
func (k RouteKey) String() string {
	b, _ := k.AppendText(make([]byte, 0, 48))
	return string(b)
}

// AppendText appends k's text (String's) to b (encoding.TextAppender).
// It never fails.
func (k RouteKey) AppendText(b []byte) ([]byte, error) {
	b = strconv.AppendUint(b, uint64(k.Table), 10)
	b = append(b, '/')
	if k.Prefix.IsValid() {
		b = k.Prefix.AppendTo(b)
	} else {
		b = append(b, k.Prefix.String()...) // AppendTo writes nothing for the zero prefix
	}
	b = append(b, '/')
	return strconv.AppendUint(b, uint64(k.Metric), 10), nil
}

// ParseRouteKey parses TABLE/PREFIX/METRIC (see RouteKey.String), as given
// to the HTTP API and the CLI. Table and metric are decimal; table 0 and,
// for IPv6, metric 0 are read as NewRouteKey reads them. The prefix must be
// masked, as in a Route.
func ParseRouteKey(s string) (RouteKey, error) {
	first, last := strings.IndexByte(s, '/'), strings.LastIndexByte(s, '/')
	if first < 0 || last-first < 2 || strings.Count(s[first+1:last], "/") != 1 {
		return RouteKey{}, fmt.Errorf("route key %q: want TABLE/PREFIX/METRIC, such as 254/10.0.0.0/8/0", s)
	}
	table, err := strconv.ParseUint(s[:first], 10, 32)
	if err != nil {
		return RouteKey{}, fmt.Errorf("route key %q: table: %w", s, errors.Unwrap(err))
	}
	p, err := netip.ParsePrefix(s[first+1 : last])
	if err != nil {
		return RouteKey{}, fmt.Errorf("route key %q: %w", s, err)
	}
	if p.Masked() != p {
		return RouteKey{}, fmt.Errorf("route key %q: prefix %s has host bits set (did you mean %s?)", s, p, p.Masked())
	}
	metric, err := strconv.ParseUint(s[last+1:], 10, 32)
	if err != nil {
		return RouteKey{}, fmt.Errorf("route key %q: metric: %w", s, errors.Unwrap(err))
	}
	return NewRouteKey(uint32(table), p, uint32(metric)), nil
}
