// Package backoff is the one retry backoff of the project, shared by hive's
// jobs and the reconciler's retries: exponential from Min, doubling per
// failed attempt, capped at Max, with up to a quarter of jitter added (and
// the cap still holding) so that many failures at once do not retry in
// lockstep.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Defaults for the zero values of Backoff, the same for jobs and
// reconcilers.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = time.Minute
)

// Backoff is the wait before a retry. The zero value means DefaultMin and
// DefaultMax; a Max below Min is raised to Min.
type Backoff struct {
	Min, Max time.Duration
}

// WithDefaults returns b with its zero fields set to the defaults and Max
// raised to Min if below.
func (b Backoff) WithDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultMin
	}
	if b.Max <= 0 {
		b.Max = max(DefaultMax, b.Min)
	}
	b.Max = max(b.Max, b.Min)
	return b
}

// Duration returns the wait before the retry that follows the given number
// of failed attempts (1 for the first retry): Min·2^(attempts-1), capped at
// Max, plus up to 25% jitter within the cap.
func (b Backoff) Duration(attempts int) time.Duration {
	b = b.WithDefaults()
	d := b.Min
	for i := 1; i < attempts && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	return min(d, b.Max)
}
