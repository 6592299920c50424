package health

import (
	"fmt"
	"sync"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
)

// Tree is a health tree. The zero value is not usable; use NewTree.
type Tree struct {
	mu   sync.Mutex
	now  func() time.Time
	root *node
	// phase, when set, is the hive's lifecycle phase ("starting",
	// "stopping") that the root reads as phaseLevel (see Starting).
	phase      string
	phaseLevel Level
}

// NewTree returns an empty tree whose root scope is named "hive".
func NewTree() *Tree {
	t := &Tree{now: time.Now}
	t.root = &node{tree: t, name: "hive", level: LevelUnknown, module: true}
	return t
}

// Starting marks the tree as starting until Started: meanwhile the root
// reads Unknown with the message "starting" (Degraded still shows), so
// that /healthz never answers 200 for a program that is half started, even
// when every scope that exists yet is OK (the jobs of hooks not yet
// started have no scope). The hive calls it before it starts its hooks.
func (t *Tree) Starting() { t.setPhase("starting", LevelUnknown) }

// Started ends Starting: the root reads the worst of its scopes again.
// The hive calls it once every hook started.
func (t *Tree) Started() { t.setPhase("", "") }

// Stopping marks the tree as stopping for good: the root reads Stopped
// with the message "stopping" (Degraded still shows). The hive calls it
// before it stops its hooks.
func (t *Tree) Stopping() { t.setPhase("stopping", LevelStopped) }

func (t *Tree) setPhase(phase string, level Level) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phase, t.phaseLevel = phase, level
}

// Root returns the root scope: the scope of cells outside every module.
// Modules hang below it.
func (t *Tree) Root() cell.Health { return t.root }

// Module returns the scope of the module with this full id (the root for
// an empty id), creating it and the scopes of its parent modules as needed
// (Unknown until they report). Unlike NewScope it returns the same scope
// for the same id every time: the hive gives each module its scope this
// way. If a sibling scope that is not a module already has the name, the
// module's scope gets a "#n" suffix in the tree; metrics still label it
// with the module id.
func (t *Tree) Module(id cell.FullModuleID) cell.Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.root
	for i, name := range id {
		full := id[:i+1].String()
		var next *node
		for _, c := range n.children {
			if c.module && c.moduleID == full {
				next = c
				break
			}
		}
		if next == nil {
			next = n.addChildLocked(n.uniqueNameLocked(name))
			next.module, next.moduleID = true, full
		}
		n = next
	}
	return n
}

// node is one scope; all fields are guarded by tree.mu.
type node struct {
	tree     *Tree
	parent   *node
	name     string
	id       string
	level    Level
	message  string
	err      string
	updated  time.Time
	reported bool
	closed   bool
	children []*node
	module   bool   // a module's scope (or the root)
	moduleID string // the module's full id, when module
}

func (n *node) set(level Level, msg string, err error) {
	t := n.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.closed {
		return
	}
	n.level, n.message, n.reported, n.updated = level, msg, true, t.now()
	n.err = ""
	if err != nil {
		n.err = err.Error()
	}
}

// OK marks the scope healthy.
func (n *node) OK(status string) { n.set(LevelOK, status, nil) }

// Degraded marks the scope unhealthy with a reason and the last error.
func (n *node) Degraded(reason string, err error) { n.set(LevelDegraded, reason, err) }

// Stopped marks the scope as finished.
func (n *node) Stopped(reason string) { n.set(LevelStopped, reason, nil) }

// NewScope opens a child scope with a name unique among its siblings.
func (n *node) NewScope(name string) cell.Health {
	n.tree.mu.Lock()
	defer n.tree.mu.Unlock()
	return n.addChildLocked(n.uniqueNameLocked(name))
}

// uniqueNameLocked returns name, or name with the first free "#n" suffix.
func (n *node) uniqueNameLocked(name string) string {
	unique := name
	for i := 2; n.hasChildLocked(unique); i++ {
		unique = fmt.Sprintf("%s#%d", name, i)
	}
	return unique
}

func (n *node) hasChildLocked(name string) bool {
	for _, c := range n.children {
		if c.name == name {
			return true
		}
	}
	return false
}

// addChildLocked adds a child; a child of a closed scope is born closed.
func (n *node) addChildLocked(name string) *node {
	c := &node{tree: n.tree, parent: n, name: name, level: LevelUnknown, closed: n.closed}
	c.id = name
	if n.parent != nil {
		c.id = n.id + "." + name
	}
	if !n.closed {
		n.children = append(n.children, c)
	}
	return c
}

// Close removes the scope and its children. Closing the root only closes
// its children.
func (n *node) Close() {
	t := n.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	if n.closed {
		return
	}
	if n.parent == nil {
		for _, c := range n.children {
			c.markClosedLocked()
		}
		n.children = nil
		return
	}
	n.markClosedLocked()
	siblings := n.parent.children
	for i, c := range siblings {
		if c == n {
			n.parent.children = append(siblings[:i:i], siblings[i+1:]...)
			break
		}
	}
}

func (n *node) markClosedLocked() {
	n.closed = true
	for _, c := range n.children {
		c.markClosedLocked()
	}
}
