package hivetest_test

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

// Greeter is the component under test: it greets on start, and a job
// counts the greetings it is asked for.
type Greeter struct{ asked chan string }

var greeterCell = cell.Module("greeter", "Greets",
	cell.Provide(func(lc cell.Lifecycle, g job.Group) (*Greeter, error) {
		gr := &Greeter{asked: make(chan string)}
		lc.Append(cell.Hook{
			OnStart: func(context.Context) error { fmt.Println("greeter started"); return nil },
			OnStop:  func(context.Context) error { fmt.Println("greeter stopped"); return nil },
		})
		return gr, g.Add(job.OneShot("greet", func(ctx context.Context, _ cell.Health) error {
			for {
				select {
				case name := <-gr.asked:
					fmt.Println("hello,", name)
				case <-ctx.Done():
					fmt.Println("greet job returned")
					return nil
				}
			}
		}))
	}),
)

// testGreeter is the body of a test: in a _test.go file it reads
// func TestGreeter(t *testing.T), and t is the test's own.
func testGreeter(t hivetest.TB) {
	var g *Greeter
	hivetest.Start(t, greeterCell, cell.Invoke(func(x *Greeter) { g = x }))
	g.asked <- "gopher"
	// No Stop: hivetest stops the hive when the test ends, and Stop waits
	// for the job to return, so goleak finds nothing left.
}

// A hive run inside a test: started by hivetest.Start, stopped in the
// test's cleanup after the job returned.
func Example() {
	t := &standIn{}
	testGreeter(t)
	t.finish()
	// Output:
	// greeter started
	// hello, gopher
	// greet job returned
	// greeter stopped
}

// standIn plays the *testing.T that an Example does not have: it runs the
// cleanups when the "test" finishes and prints failures.
type standIn struct{ cleanups []func() }

func (s *standIn) Helper()                           {}
func (s *standIn) Name() string                      { return "TestGreeter" }
func (s *standIn) Context() context.Context          { return context.Background() }
func (s *standIn) Output() io.Writer                 { return io.Discard }
func (s *standIn) Cleanup(f func())                  { s.cleanups = append(s.cleanups, f) }
func (s *standIn) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (s *standIn) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (s *standIn) finish() {
	for _, f := range slices.Backward(s.cleanups) {
		f()
	}
}
