package radix_test

import (
	"fmt"

	"github.com/steadystate/steadystate/internal/radix"
)

func Example() {
	tree := radix.New[int]()

	txn := tree.Txn()
	txn.TrackMutate(true) // close watch channels on commit
	txn.Insert([]byte("route/10.0.0.0"), 1)
	txn.Insert([]byte("route/10.1.0.0"), 2)
	txn.Insert([]byte("sysctl/ip_forward"), 3)
	tree = txn.Commit()

	for k, v := range tree.Root().Prefix([]byte("route/")).All {
		fmt.Printf("%s=%d\n", k, v)
	}

	watch, v, _ := tree.Root().GetWatch([]byte("sysctl/ip_forward"))
	txn = tree.Txn()
	txn.TrackMutate(true)
	txn.Insert([]byte("sysctl/ip_forward"), v+1)
	tree = txn.Commit()
	<-watch // closed by the commit
	newV, _ := tree.Get([]byte("sysctl/ip_forward"))
	fmt.Println("changed to", newV)
	// Output:
	// route/10.0.0.0=1
	// route/10.1.0.0=2
	// changed to 4
}
