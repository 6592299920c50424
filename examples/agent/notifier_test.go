package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The notifier's own rules, on a socket of the test's: a STATUS is sent
// once per change and on one line, READY=1 never after STOPPING=1,
// STOPPING=1 once; and a socket gone is one Warn, nothing more.
func TestNotifier(t *testing.T) {
	sock := listenNotify(t, t.TempDir())
	t.Setenv(envNotifySocket, sock.path)
	var logs syncBuffer
	n := newNotifier(slog.New(slog.NewTextHandler(&logs, nil)))
	n.Status("loading")
	n.Status("loading")
	n.Status("rejected: line 1\nline 2")
	n.Stopping()
	n.Ready("too late")
	n.Stopping()
	n.Status(strings.Repeat("é", maxStatus))
	var got []notification
	for range 4 {
		m, err := sock.next(time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	long := "STATUS=" + strings.Repeat("é", (maxStatus-3)/2) + "..."
	wantNotifications(t, got, "STATUS=loading", "STATUS=rejected: line 1; line 2", "STOPPING=1", long)
	if rest, err := sock.queued(); err != nil || len(rest) != 0 {
		t.Fatalf("more notifications: %v %v", rest, err)
	}
	if logs.String() != "" {
		t.Fatalf("logged: %s", logs.String())
	}

	// The socket gone: one Warn, and the notifier goes on.
	t.Setenv(envNotifySocket, filepath.Join(t.TempDir(), "gone.sock"))
	n = newNotifier(slog.New(slog.NewTextHandler(&logs, nil)))
	n.Status("a")
	n.Ready("b")
	n.Stopping()
	if c := strings.Count(logs.String(), "level=WARN"); c != 1 || !strings.Contains(logs.String(), "gone.sock") {
		t.Fatalf("want one Warn naming the socket, logged:\n%s", logs.String())
	}

	// Without the variable, nothing is sent and nothing is logged.
	t.Setenv(envNotifySocket, "")
	var quiet bytes.Buffer
	n = newNotifier(slog.New(slog.NewTextHandler(&quiet, nil)))
	n.Status("a")
	n.Ready("b")
	n.Stopping()
	if n.on || quiet.Len() != 0 {
		t.Fatalf("without %s: on %v, logged %q", envNotifySocket, n.on, quiet.String())
	}
}
