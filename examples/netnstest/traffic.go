package netnstest

import (
	"net"
	"testing"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

// SendUDP sends n one-byte UDP packets to 127.0.0.1:port from inside ns,
// for rules to count. The socket is unconnected, so that the port's ICMP
// unreachable is no error.
func SendUDP(t testing.TB, ns netnsutil.NS, port, n int) {
	t.Helper()
	err := ns.Do(func() error {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer c.Close()
		for range n {
			if _, err := c.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
