package etcd

// ReclaimWait is reclaimWait, for the tests.
var ReclaimWait = reclaimWait
