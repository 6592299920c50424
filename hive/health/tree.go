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
}

// NewTree returns an empty tree whose root scope is named "hive".
func NewTree() *Tree {
	t := &Tree{now: time.Now}
	t.root = &node{tree: t, name: "hive", level: cell.LevelUnknown}
	return t
}

// Root returns the root scope. Modules hang below it.
func (t *Tree) Root() cell.Health { return t.root }

// Scope returns the scope at the path of names below the root, creating
// missing scopes (as Unknown). Unlike NewScope it reuses an existing scope
// of the same name: the hive uses it to give each module one scope.
func (t *Tree) Scope(path ...string) cell.Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.root
	for _, name := range path {
		var next *node
		for _, c := range n.children {
			if c.name == name {
				next = c
				break
			}
		}
		if next == nil {
			next = n.addChildLocked(name)
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
	level    cell.Level
	message  string
	err      string
	updated  time.Time
	reported bool
	closed   bool
	children []*node
}

func (n *node) set(level cell.Level, msg string, err error) {
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
func (n *node) OK(status string) { n.set(cell.LevelOK, status, nil) }

// Degraded marks the scope unhealthy with a reason and the last error.
func (n *node) Degraded(reason string, err error) { n.set(cell.LevelDegraded, reason, err) }

// Stopped marks the scope as finished.
func (n *node) Stopped(reason string) { n.set(cell.LevelStopped, reason, nil) }

// NewScope opens a child scope with a name unique among its siblings.
func (n *node) NewScope(name string) cell.Health {
	n.tree.mu.Lock()
	defer n.tree.mu.Unlock()
	unique := name
	for i := 2; n.hasChildLocked(unique); i++ {
		unique = fmt.Sprintf("%s#%d", name, i)
	}
	return n.addChildLocked(unique)
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
	c := &node{tree: n.tree, parent: n, name: name, level: cell.LevelUnknown, closed: n.closed}
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
