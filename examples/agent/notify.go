package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// systemd's readiness protocol (sd_notify; a unit of Type=notify): when
// NOTIFY_SOCKET is set, the agent sends
//
//	STATUS=loading the desired state from FILE   before the hive starts
//	                                              (fleet mode: "listing
//	                                              the desired state from etcd")
//	STATUS=loaded FILE: N objects (version V)    each good version of the file
//	STATUS=desired state in FILE rejected; ...: why
//	                                              each rejected version
//	READY=1 and STATUS=ready: sysctls 3 (3 Done), routes ...
//	                                              once, when the agent is
//	                                              ready (firstRounds: the
//	                                              moment /readyz turns 200)
//	STOPPING=1                                   when it begins to stop
//
// READY=1 never comes before every object of the first desired state was
// tried (Done or Error), and a /readyz after it is 200: both are the one
// channel of firstRounds. A failure to send (the socket gone) is logged
// once at Warn and changes nothing else. The variable is left set: an
// unprivileged agent's sandboxed child gets a relay's socket in its place
// (see notifyRelay), so that the notifications come from the process
// systemd started.

// envNotifySocket is where the service manager listens (sd_notify).
const envNotifySocket = "NOTIFY_SOCKET"

// maxStatus is the longest STATUS text sent: the service manager reads a
// notification of at most 4 KiB (a rejected file can list many errors).
const maxStatus = 1024

// notifier sends the agent's notifications to NOTIFY_SOCKET, in the order
// of the calls; without the variable it sends nothing.
type notifier struct {
	log *slog.Logger
	on  bool

	mu       sync.Mutex
	status   string // the last STATUS sent
	stopping bool   // STOPPING=1 was sent: no READY=1 after it
	warned   bool
}

func newNotifier(log *slog.Logger) *notifier {
	return &notifier{log: log, on: os.Getenv(envNotifySocket) != ""}
}

// Status sends STATUS=msg (on one line, cut at maxStatus) unless it is
// the last one sent.
func (n *notifier) Status(msg string) {
	if !n.on {
		return
	}
	msg = statusText(msg)
	n.mu.Lock()
	defer n.mu.Unlock()
	if msg == n.status {
		return
	}
	n.status = msg
	n.sendLocked("STATUS=" + msg)
}

// Ready sends READY=1 with STATUS=msg, unless the agent is stopping.
func (n *notifier) Ready(msg string) {
	if !n.on {
		return
	}
	msg = statusText(msg)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		return
	}
	n.status = msg
	n.sendLocked(daemon.SdNotifyReady + "\nSTATUS=" + msg)
}

// Stopping sends STOPPING=1 (once).
func (n *notifier) Stopping() {
	if !n.on {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		return
	}
	n.stopping = true
	n.sendLocked(daemon.SdNotifyStopping)
}

// forward sends a notification as it is (notifyRelay's).
func (n *notifier) forward(state string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sendLocked(state)
}

func (n *notifier) sendLocked(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil && !n.warned {
		n.warned = true
		n.log.Warn("Notifying the service manager failed; the agent goes on without (this is logged once)",
			"socket", os.Getenv(envNotifySocket), "error", err)
	}
}

// statusText is msg on one line (a newline would end the STATUS), cut at
// maxStatus bytes on a character boundary.
func statusText(msg string) string {
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	if len(msg) <= maxStatus {
		return msg
	}
	cut := maxStatus - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// readySummary is the STATUS of READY=1: each table's objects by status,
// as they are in txn.
func readySummary(txn statedb.ReadTxn, kinds []kindRuntime) string {
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		ts := k.status(txn)
		var by []string
		for _, s := range []reconciler.StatusKind{reconciler.StatusKindDone, reconciler.StatusKindError, reconciler.StatusKindRefreshing, reconciler.StatusKindPending, reconciler.StatusKindUnset} {
			if c := ts.ByStatus[s.String()]; c > 0 {
				name := s.String()
				if s == reconciler.StatusKindUnset {
					name = "not tried"
				}
				by = append(by, fmt.Sprintf("%d %s", c, name))
			}
		}
		part := fmt.Sprintf("%s %d", ts.Name, ts.Objects)
		if len(by) > 0 {
			part += " (" + strings.Join(by, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return "ready: " + strings.Join(parts, ", ")
}

// notifyHealth is a health scope that also sends what it is told as the
// agent's STATUS: the desired file's loads and rejections.
type notifyHealth struct {
	cell.Health
	n *notifier
}

func (h notifyHealth) OK(status string) {
	h.Health.OK(status)
	h.n.Status(status)
}

func (h notifyHealth) Degraded(reason string, err error) {
	h.Health.Degraded(reason, err)
	if err != nil {
		reason += ": " + err.Error()
	}
	h.n.Status(reason)
}

// startNotify adds the job that sends READY=1 once the agent is ready,
// and the hook that sends STOPPING=1. It is the agent's last Invoke, so
// its hook is the last started and the first stopped: STOPPING=1 goes
// out when the agent begins to stop.
// Its health scope says whether it notifies (off is OK: not under
// systemd).
func startNotify(jobs job.Group, lc cell.Lifecycle, health cell.Health, n *notifier, rounds *firstRounds, db *statedb.DB, in kindsIn) error {
	if !n.on {
		health.OK("off: " + envNotifySocket + " is not set")
		return nil
	}
	health.OK("notifying " + os.Getenv(envNotifySocket))
	err := jobs.Add(job.OneShot("ready", func(ctx context.Context, _ cell.Health) error {
		select {
		case <-rounds.Done():
			n.Ready(readySummary(db.ReadTxn(), in.sorted()))
		case <-ctx.Done():
		}
		return nil
	}))
	lc.Append(cell.Hook{OnStop: func(context.Context) error {
		n.Stopping()
		return nil
	}})
	return err
}
