package leaf

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// fakeSource leases consecutive ranges at once (or fails as told), for pool tests.
type fakeSource struct {
	mu     sync.Mutex
	next   int64
	calls  int
	sizes  []int
	fail   error
	split  int       // ranges per lease (>= 1)
	leased []IDRange // every range handed out, in order
	block  chan struct{}
	leases atomic.Int64
}

func (f *fakeSource) LeaseRanges(ctx context.Context, kind IDKind, name string, count int) (IDRanges, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return IDRanges{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.sizes = append(f.sizes, count)
	if f.fail != nil {
		return IDRanges{}, f.fail
	}
	f.leases.Add(1)
	parts := f.split
	if parts < 1 {
		parts = 1
	}
	var out IDRanges
	left := int64(count)
	for i := 0; i < parts && left > 0; i++ {
		n := left / int64(parts-i)
		if i == parts-1 {
			n = left
		}
		if n == 0 {
			continue
		}
		f.next += 7 // a gap between ranges, as a real cluster may leave
		out.Ranges = append(out.Ranges, IDRange{Start: f.next, End: f.next + n})
		f.leased = append(f.leased, IDRange{Start: f.next, End: f.next + n})
		f.next += n
		left -= n
	}
	return out, nil
}

func (f *fakeSource) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

var errFake = errors.New("fake lease failure")

// outsideLeases is the first of ids (ascending) that lies in no range this source leased, and
// whether there is one.
func (f *fakeSource) outsideLeases(ids []int64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := 0
	for _, id := range ids {
		for r < len(f.leased) && f.leased[r].End <= id {
			r++
		}
		if r == len(f.leased) || id < f.leased[r].Start {
			return id, true
		}
	}
	return 0, false
}
