package backoff

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for attempts, base := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 50: time.Second,
	} {
		for range 100 {
			d := b.Duration(attempts)
			if d < base || d > min(base+base/4, b.Max) {
				t.Fatalf("Duration(%d) = %v, want in [%v, %v]", attempts, d, base, min(base+base/4, b.Max))
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	if got := (Backoff{}).WithDefaults(); got.Min != DefaultMin || got.Max != DefaultMax {
		t.Fatalf("zero Backoff = %+v, want Min %v Max %v", got, DefaultMin, DefaultMax)
	}
	if DefaultMin != 100*time.Millisecond || DefaultMax != time.Minute {
		t.Fatalf("defaults changed: %v %v (update the docs that state them)", DefaultMin, DefaultMax)
	}
	if got := (Backoff{Min: 2 * time.Minute}).WithDefaults(); got.Max != 2*time.Minute {
		t.Fatalf("Max below Min not raised: %+v", got)
	}
	if got := (Backoff{Min: time.Second, Max: time.Millisecond}).WithDefaults(); got.Max != time.Second {
		t.Fatalf("Max below Min not raised: %+v", got)
	}
}
