package main

import (
	"sync"

	"github.com/steadystate/steadystate/reconciler"
)

// repairLogSize is how many of the latest repairs of drift `agent status`
// shows per table.
const repairLogSize = 5

// repairLogs keeps the latest repairs of drift of each table (what the
// reconcilers hand to Config.OnRepair, see withAgent), for the status API.
type repairLogs struct {
	mu      sync.Mutex
	byTable map[string]*reconciler.RepairLog
}

func newRepairLogs() *repairLogs { return &repairLogs{byTable: map[string]*reconciler.RepairLog{}} }

// of returns the log of table, made on first use.
func (l *repairLogs) of(table string) *reconciler.RepairLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	rl := l.byTable[table]
	if rl == nil {
		rl = &reconciler.RepairLog{Size: repairLogSize}
		l.byTable[table] = rl
	}
	return rl
}
