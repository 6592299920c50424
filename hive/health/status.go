package health

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Level is the health of one scope.
type Level string

// Health levels. A scope is Unknown until it first reports.
const (
	LevelOK       Level = "OK"
	LevelDegraded Level = "Degraded"
	LevelStopped  Level = "Stopped"
	LevelUnknown  Level = "Unknown"
)

// Status is a snapshot of one scope and its children, ready for JSON.
type Status struct {
	ID       string    `json:"id"` // dotted path below the root; "" for the root
	Name     string    `json:"name"`
	Level    Level     `json:"level"`
	Message  string    `json:"message,omitempty"`
	Error    string    `json:"error,omitempty"`
	Updated  time.Time `json:"updated,omitzero"`
	Children []Status  `json:"children,omitempty"`
}

// Snapshot returns the whole tree, consistent at one instant.
func (t *Tree) Snapshot() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.root.statusLocked()
}

// severity orders levels for aggregation: higher is worse.
var severity = map[Level]int{
	LevelStopped:  0,
	LevelOK:       1,
	LevelUnknown:  2,
	LevelDegraded: 3,
}

func (n *node) statusLocked() Status {
	s := Status{
		ID: n.id, Name: n.name,
		Message: n.message, Error: n.err, Updated: n.updated,
	}
	levels := make([]Level, 0, len(n.children))
	for _, c := range n.children {
		cs := c.statusLocked()
		levels = append(levels, cs.Level)
		s.Children = append(s.Children, cs)
	}
	s.Level = n.effective(levels)
	if t := n.tree; n.parent == nil && t.phase != "" {
		if s.Level != LevelDegraded {
			s.Level = t.phaseLevel
		}
		if s.Message == "" {
			s.Message = t.phase
		}
	}
	return s
}

// effective returns the scope's level given its children's effective
// levels: the worst of its own report and theirs. A scope that never
// reported has no level of its own: it shows its children's worst, or
// Unknown without children.
func (n *node) effective(children []Level) Level {
	if len(children) == 0 {
		return n.level
	}
	l := children[0]
	if n.reported {
		l = n.level
	}
	for _, c := range children {
		if severity[c] > severity[l] {
			l = c
		}
	}
	return l
}

// WriteText prints the status tree, one scope a line, indented by depth:
// "name  Level  message: error".
func (s Status) WriteText(w io.Writer) error {
	var b strings.Builder
	s.writeText(&b, 0)
	_, err := io.WriteString(w, b.String())
	return err
}

func (s Status) writeText(b *strings.Builder, depth int) {
	line := fmt.Sprintf("%s%s  %s", strings.Repeat("  ", depth), s.Name, s.Level)
	if s.Message != "" {
		line += "  " + s.Message
	}
	if s.Error != "" {
		line += ": " + s.Error
	}
	b.WriteString(line + "\n")
	for _, c := range s.Children {
		c.writeText(b, depth+1)
	}
}
