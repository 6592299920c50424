package job_test

import (
	"context"
	"fmt"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

// A module that runs a job. The job reports under the module's health
// scope and is stopped (its context cancelled) with the hive.
func ExampleOneShot() {
	done := make(chan struct{})
	h := hive.New(cell.Module("loader", "Loads data",
		cell.Invoke(func(g job.Group) error {
			return g.Add(job.OneShot("load", func(ctx context.Context, health cell.Health) error {
				fmt.Println("loading")
				health.OK("loaded 3 items")
				close(done)
				<-ctx.Done() // keep serving until the hive stops
				return nil
			}))
		}),
	))
	if err := h.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	<-done
	for _, module := range h.Health().Snapshot().Children {
		for _, j := range module.Children {
			fmt.Println(j.ID, j.Level, j.Message)
		}
	}
	if err := h.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// loading
	// loader.load OK loaded 3 items
}
