package leaf

import (
	"context"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Goroutines sharing a tag would all add to one cursor, the current span's, for every ID: on
// two cores that cache line bounces between them and 8 goroutines together take fewer IDs than
// one alone (0.17 × one goroutine, measured; a bare shared atomic counter does no better).
// So TagPool.NextID adds to one of a few stripes instead. Each stripe holds a chunk of the
// span (claimed from the span's cursor with one atomic add, as LocalIDs does), and a goroutine
// picks its stripe from the address of its own stack, which differs between goroutines and
// stays put while a goroutine runs. Goroutines on different stripes touch different cache
// lines; two that share one still get distinct IDs (the chunk's cursor is atomic). The hit path
// stays one atomic add, with no lock, allocation, syscall or clock.
//
// IDs a goroutine takes increase while it keeps its stripe; a goroutine's stack can move (it
// grew) and so change stripes, after which it may take lower IDs another goroutine's chunk
// left. Across goroutines, IDs interleave by chunk, as with LocalIDs.

// chunk is a stripe's part of a span, [next, end); only next changes. 64 bytes, so that two
// chunks never share a cache line (the allocator's 64-byte class is 64-byte aligned).
type chunk struct {
	next atomic.Int64
	end  int64
	// leasedNs is the lease's time (TagPool.sinceEpoch), for the snowflake staleness check.
	leasedNs int64
	_        [40]byte
}

// stripe holds its current chunk, on a cache line of its own.
type stripe struct {
	cur atomic.Pointer[chunk]
	_   [56]byte
}

// emptyChunk holds nothing: every take misses.
var emptyChunk = &chunk{}

// maxChunk is the most IDs a stripe claims at once; a smaller span gives chunks of a 64th of
// it, and a span under 128 IDs none (its IDs come from the span's cursor directly).
const maxChunk = 64

// newStripes returns a power of two of stripes, 4 per processor, from 4 to 64.
func newStripes() []stripe {
	n := 4
	for n < 4*runtime.GOMAXPROCS(0) && n < 64 {
		n *= 2
	}
	s := make([]stripe, n) // TagPool.mask is n-1
	for i := range s {
		s[i].cur.Store(emptyChunk)
	}
	return s
}

// stripeOf is the calling goroutine's stripe, from its stack's address: goroutine stacks are
// at least 8 KiB apart (and 8 KiB aligned), so the bits above 13 tell them apart.
func (p *TagPool) stripeOf() *stripe {
	var here byte
	return &p.stripes[(uintptr(unsafe.Pointer(&here))>>13)&p.mask]
}

// take is the hit path: one atomic add on the caller's stripe's chunk.
func (p *TagPool) take(ctx context.Context, wait bool) (int64, error) {
	st := p.stripeOf()
	c := st.cur.Load()
	id := c.next.Add(1) - 1
	if id < c.end && (p.kind != KindSnowflake || c.leasedNs >= p.retiredBelow.Load()) {
		return id, nil
	}
	return p.claim(ctx, st, c, wait)
}

// claim gives the stripe a new chunk of the current span and returns its first ID; with a span
// too small for chunks, one ID of it; with the span used up, the slow path's ID.
func (p *TagPool) claim(ctx context.Context, st *stripe, old *chunk, wait bool) (int64, error) {
	s := p.cur.Load()
	size := (s.end - s.start) / 64
	if size > maxChunk {
		size = maxChunk
	}
	if size < 2 {
		return p.one(ctx, s, wait)
	}
	first := s.next.Add(size) - size
	if first < s.start || first >= s.end {
		return p.slow(ctx, wait)
	}
	end := first + size
	if end > s.end {
		end = s.end
	}
	if s.prefetch >= first && s.prefetch < end {
		p.want()
	}
	if end-first > 1 {
		c := &chunk{end: end, leasedNs: p.sinceEpoch(s.lease)}
		c.next.Store(first + 1)
		// Another goroutine of this stripe may have installed a chunk meanwhile: then this
		// one's rest is a gap (counted, never handed out twice).
		if !st.cur.CompareAndSwap(old, c) {
			p.dropped.Add(end - first - 1)
		}
	}
	return first, nil
}

// one takes a single ID from span s's cursor (the hit path before stripes), else the slow path.
func (p *TagPool) one(ctx context.Context, s *span, wait bool) (int64, error) {
	id := s.next.Add(1) - 1
	if id < s.end && id >= s.start {
		if id == s.prefetch {
			p.want()
		}
		return id, nil
	}
	return p.slow(ctx, wait)
}

// striped is the IDs the stripes' chunks still hold, and those of them a retired snowflake
// lease made stale.
func (p *TagPool) striped() (held, stale int64) {
	below := p.retiredBelow.Load()
	for i := range p.stripes {
		c := p.stripes[i].cur.Load()
		if left := c.end - c.next.Load(); left > 0 {
			if p.kind == KindSnowflake && c.leasedNs < below {
				stale += left
			} else {
				held += left
			}
		}
	}
	return held, stale
}
