// Command etcd is the etcd server of the module's etcd version (etcdmain
// from the Go module proxy), built by the tests to run a cluster of real
// processes that they can kill and pause.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
