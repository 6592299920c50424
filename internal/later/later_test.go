package later

import (
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The work waits for idle, or for Wait, whichever comes first; without
// idle it runs at once. Its result is returned once per Wait, the same.
func TestStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ran := 0
		work := func() int { ran++; return ran }

		idle := make(chan struct{})
		r := Start(idle, work)
		synctest.Wait()
		if ran != 0 {
			t.Fatal("the work ran before idle")
		}
		close(idle)
		synctest.Wait()
		if ran != 1 {
			t.Fatal("the work did not run once idle")
		}
		first := r.Wait()
		if again := r.Wait(); first != 1 || again != 1 || ran != 1 {
			t.Fatalf("Wait returned %d then %d, the work ran %d times; want its one result, 1", first, again, ran)
		}

		r = Start(make(chan struct{}), work) // idle never closes
		synctest.Wait()
		if ran != 1 {
			t.Fatal("the work ran without idle or Wait")
		}
		if got := r.Wait(); got != 2 {
			t.Fatalf("Wait before idle returned %d, want the work run at once (2)", got)
		}

		r = Start(nil, work)
		synctest.Wait()
		if ran != 3 || r.Wait() != 3 {
			t.Fatal("without idle the work did not run at once")
		}
	})
}
