package leaf

import (
	"math"
	"time"
)

// The lease size of a pool, pure arithmetic. The refill goroutine measures the consumption
// rate between two lease requests (IDs served over the time between them) and sizes the next
// lease to last about period at that rate: rate × period, within [min, max]. When callers had
// to wait since the previous request, the measured rate is bounded by what was supplied, not by
// what was wanted, so the lease at least doubles (halving then would starve the callers
// further). A lease shrinks by at most half per request: a quiet moment (or two requests close
// together, with little served between them) is not yet a trend.

// sizing is the bounds and aim of the lease size.
type sizing struct {
	min, max int64
	period   time.Duration
}

// clamp is size within [min, max].
func (s sizing) clamp(size int64) int64 {
	if size < s.min {
		return s.min
	}
	if size > s.max {
		return s.max
	}
	return size
}

// next is the size of the next lease, given the current one, the measured rate (IDs per
// second) and whether callers waited since the previous request.
func (s sizing) next(current int64, ratePerSec float64, waited bool) int64 {
	want := ratePerSec * s.period.Seconds()
	if math.IsNaN(want) || want < 0 {
		want = 0
	}
	if want > float64(s.max) {
		want = float64(s.max)
	}
	size := int64(math.Ceil(want))
	if size < current/2 {
		size = current / 2
	}
	if waited && size < 2*current {
		size = 2 * current
	}
	return s.clamp(size)
}

// rate is IDs per second (0 for no time).
func rate(ids int64, elapsed time.Duration) float64 {
	if elapsed <= 0 || ids < 0 {
		return 0
	}
	return float64(ids) / elapsed.Seconds()
}

// leaseBackoff is the wait before retrying a failed lease after failures (1, 2, ...) failures
// in a row: least, doubling, at most most.
func leaseBackoff(failures int, least, most time.Duration) time.Duration {
	shift := failures - 1
	if shift < 0 {
		shift = 0
	}
	if shift > 20 {
		shift = 20
	}
	d := least << uint(shift)
	if d > most || d < least {
		d = most
	}
	return d
}

// prefetchOffset is the offset in a lease of size IDs whose take asks for the next lease:
// 10% of it.
func prefetchOffset(size int64) int64 { return size / 10 }
