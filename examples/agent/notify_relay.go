package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// notifyRelay passes an unprivileged agent's sandboxed child's
// notifications on to NOTIFY_SOCKET from this process. systemd takes a
// Type=notify service's notifications from the process it started (the
// default NotifyAccess=main): that is this one, which only waits for the
// child (runInUserNS), while the child does the work and knows when it
// is ready. And in a network namespace of its own, the child could not
// reach an abstract NOTIFY_SOCKET ("@..."). So the child's NOTIFY_SOCKET
// is the relay's socket, in a private directory, and each datagram it
// sends there is sent on as it is.
type notifyRelay struct {
	dir  string
	conn *net.UnixConn
	end  string // the datagram that ends the relay (Close)
	wg   sync.WaitGroup
}

// startNotifyRelay listens on a new socket and sends on what arrives,
// through n.
func startNotifyRelay(n *notifier) (*notifyRelay, error) {
	dir, err := os.MkdirTemp("", "steadystate-agent-notify-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &notifyRelay{dir: dir, conn: conn, end: "END=" + rand.Text()}
	r.wg.Go(func() {
		buf := make([]byte, 64<<10)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			msg := string(buf[:k])
			if msg == r.end {
				return
			}
			n.forward(msg)
		}
	})
	return r, nil
}

// Path is the socket the child notifies.
func (r *notifyRelay) Path() string { return filepath.Join(r.dir, "notify.sock") }

// Close ends the relay once the child has exited: what the child sent is
// queued before the end datagram, so all of it is sent on first. Then
// the socket and its directory are removed.
func (r *notifyRelay) Close() error {
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: r.Path(), Net: "unixgram"})
	if err == nil {
		_, err = c.Write([]byte(r.end))
		c.Close()
	}
	if err != nil {
		err = fmt.Errorf("ending the notification relay: %w", err)
		r.conn.Close() // ends the reader
	}
	r.wg.Wait()
	r.conn.Close()
	return errors.Join(err, os.RemoveAll(r.dir))
}
