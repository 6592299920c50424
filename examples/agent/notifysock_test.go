package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

// notifySocket is a test's NOTIFY_SOCKET, as systemd's: a unixgram
// socket that receives the agent's notifications with the sender's
// credentials (SO_PASSCRED), so that a test sees which process sent each.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

// notification is one datagram: its lines (KEY=VALUE) and the sender's
// PID.
type notification struct {
	lines []string
	pid   int
}

func (n notification) has(line string) bool { return slices.Contains(n.lines, line) }

func (n notification) String() string { return fmt.Sprintf("pid %d: %q", n.pid, n.lines) }

// listenNotify listens on a new notify socket in dir.
func listenNotify(tb testing.TB, dir string) *notifySocket {
	tb.Helper()
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	raw, err := conn.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) }); err != nil || serr != nil {
		tb.Fatal(err, serr)
	}
	return &notifySocket{path: path, conn: conn}
}

// env is the agent's environment variable.
func (s *notifySocket) env() []string { return []string{envNotifySocket + "=" + s.path} }

// next waits (until deadline) for the next notification.
func (s *notifySocket) next(deadline time.Time) (notification, error) {
	if err := s.conn.SetReadDeadline(deadline); err != nil {
		return notification{}, err
	}
	buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return notification{}, err
	}
	return parseNotification(buf[:n], oob[:oobn])
}

// queued returns the notifications received and not read yet, without
// waiting: after the sender exited, everything it sent.
func (s *notifySocket) queued() ([]notification, error) {
	raw, err := s.conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var out []notification
	for {
		buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(unix.SizeofUcred))
		var n, oobn int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_DONTWAIT)
			return true
		}); err != nil {
			return out, err
		}
		if errors.Is(rerr, unix.EAGAIN) {
			return out, nil
		}
		if rerr != nil {
			return out, rerr
		}
		m, err := parseNotification(buf[:n], oob[:oobn])
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

func parseNotification(data, oob []byte) (notification, error) {
	m := notification{lines: strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return m, err
	}
	for _, c := range msgs {
		if cred, err := unix.ParseUnixCredentials(&c); err == nil {
			m.pid = int(cred.Pid)
		}
	}
	if m.pid == 0 {
		return m, fmt.Errorf("notification %q without the sender's credentials", data)
	}
	return m, nil
}

// until reads notifications (each within timeout of the call) until one
// has line, and returns all it read, that one last.
func (s *notifySocket) until(tb testing.TB, line string, timeout time.Duration) []notification {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	var got []notification
	for {
		m, err := s.next(deadline)
		if err != nil {
			tb.Fatalf("waiting for %s: %v; received %v", line, err, got)
		}
		got = append(got, m)
		if m.has(line) {
			return got
		}
	}
}

// startReady starts the agent (startAgentEnv) with NOTIFY_SOCKET set to a
// new socket and waits, up to timeout, for READY=1. It returns the agent,
// the socket, the time from the start of its process to READY=1
// received, and the notifications until then (READY=1's last). Right
// after READY=1, /readyz must answer 200: it fails the test otherwise,
// and if a notification came from another process than the one started
// (systemd takes them from its main PID only).
func startReady(tb testing.TB, bin, desired string, ns netnsutil.NS, timeout time.Duration, extra ...string) (*agentProc, *notifySocket, time.Duration, []notification) {
	tb.Helper()
	sock := listenNotify(tb, tb.TempDir())
	start := time.Now()
	a := startAgentEnv(tb, bin, desired, ns, sock.env(), extra...)
	got := sock.until(tb, "READY=1", timeout)
	took := time.Since(start)
	if err := a.probe("/readyz", 200, ""); err != nil {
		tb.Fatalf("right after READY=1: %v", err)
	}
	for _, m := range got {
		if m.pid != a.cmd.Process.Pid {
			tb.Fatalf("notification %v not from the agent's process %d", m, a.cmd.Process.Pid)
		}
	}
	return a, sock, took, got
}
