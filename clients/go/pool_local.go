package leaf

import "context"

// LocalIDs is a per-goroutine cache of a TagPool (the Rust client's LocalIds): it takes a
// chunk of consecutive IDs from the shared range with one atomic add and hands them out with no
// atomic write (a snowflake key's loads the retirement mark), so goroutines sharing a tag do
// not contend on the range's cursor for every ID. Not safe for concurrent use: give each goroutine its own (TagPool.Local). IDs left
// in a chunk that is dropped are a gap, never a duplicate; goroutines' IDs interleave by chunk.
type LocalIDs struct {
	p        *TagPool
	next     int64
	end      int64
	leasedNs int64
	chunk    int64
}

// Local returns a new per-goroutine cache taking chunk (1 to 65,536; 64 when out of range) IDs
// at a time.
func (p *TagPool) Local(chunk int) *LocalIDs {
	if chunk < 1 || chunk > 65536 {
		chunk = 64
	}
	return &LocalIDs{p: p, chunk: int64(chunk)}
}

// NextID returns the next ID of the chunk, or takes a new chunk (waiting like TagPool.NextID
// when nothing is buffered). A snowflake chunk whose lease was retired since is dropped.
func (l *LocalIDs) NextID() (int64, error) {
	if l.next < l.end && (l.p.kind != KindSnowflake || l.leasedNs >= l.p.retiredBelow.Load()) {
		id := l.next
		l.next++
		return id, nil
	}
	return l.take(context.Background())
}

// NextIDContext is NextID, waiting at most until ctx ends.
func (l *LocalIDs) NextIDContext(ctx context.Context) (int64, error) {
	if l.next < l.end && (l.p.kind != KindSnowflake || l.leasedNs >= l.p.retiredBelow.Load()) {
		id := l.next
		l.next++
		return id, nil
	}
	return l.take(ctx)
}

// take claims a chunk of the current span with one atomic add, or falls back to one ID from
// the tag's slow path.
func (l *LocalIDs) take(ctx context.Context) (int64, error) {
	p := l.p
	l.next, l.end = 0, 0
	s := p.cur.Load()
	first := s.next.Add(l.chunk) - l.chunk
	if first >= s.start && first < s.end {
		end := s.end
		if s.end-first > l.chunk {
			end = first + l.chunk
		}
		if s.prefetch >= first && s.prefetch < end {
			p.want()
		}
		l.next, l.end, l.leasedNs = first+1, end, p.sinceEpoch(s.lease)
		return first, nil
	}
	return p.slow(ctx, true)
}
