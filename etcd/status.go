package etcd

import "time"

// NodeStatus is a node's summary, kept in etcd under its lease.
type NodeStatus struct {
	Node string `json:"node"`
	// Revision is the etcd revision of the desired state the node has
	// reconciled: every change up to it was attempted.
	Revision int64 `json:"revision"`
	// Objects counts the node's desired objects by status kind ("Done",
	// "Pending", "Error", ...).
	Objects map[string]int `json:"objects,omitempty"`
	// Errors are the latest failures, at most a few.
	Errors []string `json:"errors,omitempty"`
}

// Rejected is the NodeStatus.Objects kind of the desired objects a node
// could not take (its reflector's transform refused their latest value).
const Rejected = "Rejected"

// Done is the NodeStatus.Objects kind of the objects applied.
const Done = "Done"

// DeleteFailing is the NodeStatus.Objects kind of the objects removed from
// a node's desired state that are still in its real system: their delete
// failed and is retried. They are not applied.
const DeleteFailing = "DeleteFailing"

// Received tells whether the node's tables hold the desired state of
// revision rev: it reached rev (every change up to it is in its tables).
func (s NodeStatus) Received(rev int64) bool { return s.Revision >= rev }

// Applied tells whether the node has applied the desired state of
// revision rev: it received it, and every object is Done (one pending,
// failing, rejected or of any other kind is not applied).
func (s NodeStatus) Applied(rev int64) bool {
	if !s.Received(rev) {
		return false
	}
	for kind, n := range s.Objects {
		if kind != Done && n > 0 {
			return false
		}
	}
	return true
}

// Failed tells whether the node reports an error for the desired state of
// revision rev: it received it and some objects failed (their update or
// their delete) or were rejected.
func (s NodeStatus) Failed(rev int64) bool {
	return s.Received(rev) && (s.Objects["Error"] > 0 || s.Objects[Rejected] > 0 || s.Objects[DeleteFailing] > 0)
}

// ObjectStatus is one object's status on a node, kept under
// Layout.ObjectStatus when PublisherConfig.ObjectStatuses is set.
type ObjectStatus struct {
	Kind  string `json:"kind"` // "Done", "Pending", "Error", ...
	Error string `json:"error,omitempty"`
}

// NodeRecord is what the fleet remembers of a node, kept without a lease
// under Layout.Record: the publisher writes it in the transaction of every
// status write, and again at least every PublisherConfig.SeenInterval; a
// clean stop deletes it with the status. A record whose node has no status
// (its lease expired) is a lost node, listed until Forget.
type NodeRecord struct {
	NodeStatus // the status written with it
	// LastSeen is the node's clock at the write.
	LastSeen time.Time `json:"lastSeen"`
}
