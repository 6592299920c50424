package health

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
)

// Status is a snapshot of one scope and its children, ready for JSON.
type Status struct {
	ID       string     `json:"id"` // dotted path below the root; "" for the root
	Name     string     `json:"name"`
	Level    cell.Level `json:"level"`
	Message  string     `json:"message,omitempty"`
	Error    string     `json:"error,omitempty"`
	Updated  time.Time  `json:"updated,omitzero"`
	Children []Status   `json:"children,omitempty"`
}

// Snapshot returns the whole tree, consistent at one instant.
func (t *Tree) Snapshot() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.root.statusLocked()
}

// All returns the module scopes (the root's children) as a list.
func (t *Tree) All() []Status { return t.Snapshot().Children }

// severity orders levels for aggregation: higher is worse.
var severity = map[cell.Level]int{
	cell.LevelStopped:  0,
	cell.LevelOK:       1,
	cell.LevelUnknown:  2,
	cell.LevelDegraded: 3,
}

func (n *node) statusLocked() Status {
	s := Status{
		ID: n.id, Name: n.name, Level: n.level,
		Message: n.message, Error: n.err, Updated: n.updated,
	}
	for i, c := range n.children {
		cs := c.statusLocked()
		if !n.reported && (i == 0 || severity[cs.Level] > severity[s.Level]) {
			s.Level = cs.Level
		}
		s.Children = append(s.Children, cs)
	}
	return s
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
