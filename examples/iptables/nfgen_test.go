package iptables

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnstest"
)

// genMessage is a NEWGEN message with attrs (type, 4-byte big-endian value).
func genMessage(t testing.TB, attrs ...[2]uint32) netlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	for _, a := range attrs {
		ae.Uint32(uint16(a[0]), a[1])
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return netlink.Message{Header: netlink.Header{Type: nftNewGen}, Data: append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}, b...)}
}

func TestParseGen(t *testing.T) {
	// The kernel's reply: the ID, the process ID, then (a string) the
	// process name; attributes it may add later are skipped.
	m := genMessage(t, [2]uint32{unix.NFTA_GEN_PROC_PID, 77}, [2]uint32{unix.NFTA_GEN_ID, 0xfffffffe}, [2]uint32{99, 1})
	if id, err := parseGen(m); err != nil || id != 0xfffffffe {
		t.Fatalf("parseGen = %d, %v; want 4294967294", id, err)
	}
	for _, c := range []struct {
		name string
		m    netlink.Message
		want string
	}{
		{"no ID", genMessage(t, [2]uint32{unix.NFTA_GEN_PROC_PID, 77}), "no generation ID"},
		{"short", netlink.Message{Header: netlink.Header{Type: nftNewGen}, Data: []byte{2, 0}}, "shorter than its header"},
		{"other type", netlink.Message{Header: netlink.Header{Type: nftGetGen}, Data: m.Data}, "reply of type"},
		{"cut attribute", netlink.Message{Header: netlink.Header{Type: nftNewGen}, Data: m.Data[:len(m.Data)-2]}, "nf_tables generation"},
	} {
		if _, err := parseGen(c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

func FuzzParseGen(f *testing.F) {
	f.Add(genMessage(f, [2]uint32{unix.NFTA_GEN_ID, 5}).Data)
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 8, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := parseGen(netlink.Message{Header: netlink.Header{Type: nftNewGen}, Data: data})
		if err != nil {
			return
		}
		// An ID was found: it is the last NFTA_GEN_ID of 4 bytes.
		ad, derr := netlink.NewAttributeDecoder(data[4:])
		if derr != nil {
			t.Fatalf("parseGen accepted what the decoder refuses: %v", derr)
		}
		ad.ByteOrder = binary.BigEndian
		var last uint32
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				last = ad.Uint32()
			}
		}
		if last != id {
			t.Fatalf("parseGen = %d, want %d", id, last)
		}
	})
}

// A quiet window held only the restore's own transaction when the
// generation moved by one after a success, or by none.
func TestQuietAlone(t *testing.T) {
	for _, c := range []struct {
		moved     uint32
		committed bool
		alone     bool
	}{
		{0, false, true}, {0, true, true},
		{1, true, true}, {1, false, false},
		{2, true, false}, {2, false, false},
		{0xffffffff, true, false}, // the generation went back: unknown
	} {
		if got := quietAlone(c.moved, c.committed); got != c.alone {
			t.Errorf("quietAlone(%d, %v) = %v, want %v", c.moved, c.committed, got, c.alone)
		}
	}
}

// What the quiet windows rely on, checked on this machine's kernel and
// iptables: a restore moves the ruleset's generation by one per table
// (COMMIT) that changes something, and by none when it fails; the
// barrier moves it by none.
func TestGenerationPerRestore(t *testing.T) {
	netnstest.RequireCommand(t, "iptables-restore")
	ns := netnstest.New(t)
	if nft, known := backendOf("iptables-restore"); known && !nft {
		t.Skip("iptables-restore is the legacy backend: no generations")
	}
	nsFile, err := os.Open(string(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	g, err := dialGen(int(nsFile.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gen := func() uint32 {
		t.Helper()
		n, err := g.generation()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	restore := func(in string) error {
		_, err := ns.CommandStdin([]byte(in), "iptables-restore", "--noflush")
		return err
	}
	for _, c := range []struct {
		name, input string
		fails       bool
		moved       uint32
	}{
		{"the first, which makes the table", "*filter\n:A - [0:0]\n-A A -j ACCEPT\n-I INPUT 1 -j A\nCOMMIT\n", false, 1},
		{"one table", "*filter\n-A A -s 10.0.0.1 -j DROP\n-A A -s 10.0.0.2 -j DROP\n-D A 1\nCOMMIT\n", false, 1},
		{"two tables", "*filter\n-A A -j RETURN\nCOMMIT\n*mangle\n:B - [0:0]\n-A B -j ACCEPT\nCOMMIT\n", false, 2},
		{"a rule refused", "*filter\n-A A -j ACCEPT\n-A A -m nosuchmatch -j ACCEPT\nCOMMIT\n", true, 0},
		{"a deletion of nothing", "*filter\n-A A -j ACCEPT\n-D A 99\nCOMMIT\n", true, 0},
		{"a chain deleted", "*filter\n-D INPUT -j A\n-F A\n-X A\nCOMMIT\n", false, 1},
		// What the target never writes alone (TestRestoreInputChanges):
		// these succeed and commit nothing.
		{"an empty chain made", "*filter\n:E - [0:0]\nCOMMIT\n", false, 1},
		{"an empty chain flushed", "*filter\n-F E\nCOMMIT\n", false, 0},
		{"an empty chain declared again", "*filter\n:E - [0:0]\nCOMMIT\n", false, 0},
	} {
		before := gen()
		err := restore(c.input)
		if (err != nil) != c.fails {
			t.Fatalf("%s: %v, want failure %v", c.name, err, c.fails)
		}
		if moved := gen() - before; moved != c.moved {
			t.Errorf("%s: the generation moved by %d, want %d", c.name, moved, c.moved)
		}
	}
	// The barrier of a quiet window commits nothing either.
	before := gen()
	for range 3 {
		if err := g.barrier(); err != nil {
			t.Fatal(err)
		}
	}
	if moved := gen() - before; moved != 0 {
		t.Errorf("3 barriers moved the generation by %d, want 0", moved)
	}
}
