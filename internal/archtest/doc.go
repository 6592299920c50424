// Package archtest holds the tests of the project's architecture, which run
// with every other test (make test): the cores (index, internal/...,
// statedb, reconciler, reflector) import neither the hive framework nor its
// dependencies (dig, cobra, pflag), nor Prometheus, gRPC, etcd or fsnotify.
// Their hive cells and Prometheus implementations live in the glue packages
// statedb/statedbcell, reconciler/reconcilercell and
// reflector/reflectorcell, the file source in reflector/filesource, so a
// program can use statedb, a reconciler and a reflector without the
// framework, and `go list -deps` tells the same story as the folders. The package has no code of its own.
package archtest
