package leaf

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The hit path of a TagPool: the current range is an immutable *span behind an atomic
// pointer, with an atomic cursor. NextID takes from a chunk of that span held by the caller's
// stripe (pool_stripes.go) with ONE atomic add on the chunk's cursor: a result inside the chunk
// is an ID nobody else got (each cursor value is returned by one add only, and the chunk's
// bounds never change). A used-up chunk is replaced by the next part of the span, claimed with
// one atomic add on the span's cursor; everything else (the span used up, a retired snowflake
// range, nothing leased yet) goes to the slow path under the tag's mutex, which moves the
// pointer to the next queued span or waits for a lease. No mutex, syscall or clock on the hit
// path, and an allocation only per chunk.

// span is one leased range [start, end); only next changes.
type span struct {
	_    [64]byte // next on a cache line of its own: takes write it on every ID, and the
	next atomic.Int64
	_    [64]byte // bounds every take reads would otherwise share its line (false sharing)
	// start and end bound the IDs; end exclusive.
	start, end int64
	// prefetch is the ID whose take asks for the next lease (the lease's 10% point), -1 for
	// none in this span.
	prefetch int64
	lease    *leaseInfo
}

// leaseInfo is what the spans of one lease share.
type leaseInfo struct {
	id   uint64
	size int
	sent time.Time
}

// emptySpan holds nothing: every take misses.
func emptySpan() *span {
	s := &span{start: 0, end: 0, prefetch: -1, lease: &leaseInfo{}}
	return s
}

// left is how many IDs of s are not taken yet.
func (s *span) left() int64 {
	n := s.next.Load()
	if n < s.start || n >= s.end {
		return 0
	}
	return s.end - n
}

// TagPool is the buffer of one tag's segment IDs or one key's snowflake IDs (IdPool.Segment,
// IdPool.Snowflake); safe for concurrent use.
type TagPool struct {
	cur atomic.Pointer[span]
	// stripes are where NextID takes IDs from: chunks of cur, one per group of goroutines
	// (pool_stripes.go); dropped counts IDs of chunks that lost a race to be installed.
	stripes []stripe
	mask    uintptr
	dropped atomic.Int64
	kind    IDKind
	name    string
	o       PoolOptions
	src     RangeSource
	// wanted is set (and wake signalled) when a take asks for a lease.
	wanted atomic.Bool
	wake   chan struct{}

	mu    sync.Mutex
	queue []*span // behind cur, in lease order
	// ready is closed (and replaced) when a lease lands or fails, or the pool closes.
	ready   chan struct{}
	failure error
	// rejected: failure is one waiting does not fix.
	rejected bool
	closed   bool
	c        counters

	// epoch is what lease times count from (monotonic); retiredBelow: snowflake leases sent
	// before epoch + retiredBelow are retired (LocalIDs chunks check it).
	epoch        time.Time
	retiredBelow atomic.Int64

	stop   context.CancelFunc
	ctx    context.Context
	done   sync.WaitGroup
	sizing sizing
}

// counters are a tag's books, under mu.
type counters struct {
	leased, retired, leasesOK, leasesFailed int64
	lastLeaseSize, target                   int64
	waits, exhausted, rejected              int64
	waitTime                                time.Duration
	rate                                    float64
}

// TagStats is a snapshot of one tag's (or key's) pool.
type TagStats struct {
	Kind IDKind
	Name string
	// IDsServed is IDsLeased − IDsRetired − IDsBuffered: IDs handed out (or lost to a take
	// racing a retirement). IDsRetired counts stale snowflake IDs and the rest of a stripe's
	// chunk that lost a race to be installed; IDsBuffered includes the stripes' chunks.
	IDsServed, IDsLeased, IDsRetired, IDsBuffered int64
	LeasesOK, LeasesFailed                        int64
	LastLeaseSize, LeaseTarget                    int64
	// RatePerSec is the consumption measured between the last two lease requests.
	RatePerSec                 float64
	Waits, Exhausted, Rejected int64
	WaitTime                   time.Duration
}

func newTagPool(kind IDKind, name string, src RangeSource, o PoolOptions) *TagPool {
	period := o.LeasePeriod
	if kind == KindSnowflake && o.MaxStaleness/2 < period {
		period = o.MaxStaleness / 2
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &TagPool{
		kind:    kind,
		name:    name,
		o:       o,
		src:     src,
		wake:    make(chan struct{}, 1),
		ready:   make(chan struct{}),
		ctx:     ctx,
		stop:    stop,
		epoch:   time.Now(),
		sizing:  sizing{min: int64(o.MinLease), max: int64(o.MaxLease), period: period},
		stripes: newStripes(),
	}
	p.mask = uintptr(len(p.stripes) - 1)
	p.cur.Store(emptySpan())
	p.wanted.Store(true)
	p.done.Add(1)
	go p.refill()
	return p
}

// sinceEpoch is a lease's time as nanoseconds since the pool's epoch.
func (p *TagPool) sinceEpoch(l *leaseInfo) int64 { return int64(l.sent.Sub(p.epoch)) }

// Kind returns which IDs this pool hands out.
func (p *TagPool) Kind() IDKind { return p.kind }

// Name returns the tag (or snowflake key).
func (p *TagPool) Name() string { return p.name }

// NextID returns the next ID: one atomic add while IDs are buffered; otherwise it moves to the
// next leased range, or waits up to MaxWait for a lease (*PoolExhaustedError), or fails at
// once when the last lease was refused (*PoolRejectedError), or ErrPoolClosed.
func (p *TagPool) NextID() (int64, error) {
	st := p.stripeOf()
	c := st.cur.Load()
	id := c.next.Add(1) - 1
	if id < c.end && (p.kind != KindSnowflake || c.leasedNs >= p.retiredBelow.Load()) {
		return id, nil
	}
	return p.claim(context.Background(), st, c, true)
}

// NextIDContext is NextID, waiting at most until ctx ends (and at most MaxWait).
func (p *TagPool) NextIDContext(ctx context.Context) (int64, error) {
	return p.take(ctx, true)
}

// TryNextID returns an ID if one is buffered, never waiting; false asks for a lease.
func (p *TagPool) TryNextID() (int64, bool) {
	id, err := p.take(context.Background(), false)
	return id, err == nil
}

// want asks the refill goroutine for a lease.
func (p *TagPool) want() {
	p.wanted.Store(true)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// errWouldWait is the slow path's answer to TryNextID with nothing buffered.
var errWouldWait = &PoolExhaustedError{}

// slow takes an ID off the hit path: from the current span again (another caller switched),
// from the next queued span, or after waiting for a lease.
func (p *TagPool) slow(ctx context.Context, wait bool) (int64, error) {
	var started time.Time
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		s := p.cur.Load()
		id := s.next.Add(1) - 1
		if id < s.end && id >= s.start {
			if id == s.prefetch {
				p.want()
			}
			if !started.IsZero() {
				p.c.waitTime += time.Since(started)
			}
			return id, nil
		}
		if p.advanceLocked(time.Now()) {
			continue
		}
		if p.closed {
			return 0, ErrPoolClosed
		}
		p.want()
		if !wait {
			return 0, errWouldWait
		}
		if p.rejected && p.failure != nil {
			p.c.rejected++
			return 0, &PoolRejectedError{Kind: p.kind, Name: p.name, Err: p.failure}
		}
		if started.IsZero() {
			started = time.Now()
			p.c.waits++
		}
		waited := time.Since(started)
		if waited >= p.o.MaxWait {
			p.c.exhausted++
			p.c.waitTime += waited
			return 0, &PoolExhaustedError{Kind: p.kind, Name: p.name, Waited: waited, Last: p.failure}
		}
		ready := p.ready
		p.mu.Unlock()
		t := time.NewTimer(p.o.MaxWait - waited)
		var ctxErr error
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
			ctxErr = ctx.Err()
		}
		t.Stop()
		p.mu.Lock()
		if ctxErr != nil {
			p.c.waitTime += time.Since(started)
			return 0, ctxErr
		}
	}
}

// advanceLocked moves cur to the next queued span that is not stale, when cur is used up;
// false when nothing is queued (mu held).
func (p *TagPool) advanceLocked(now time.Time) bool {
	if p.kind == KindSnowflake {
		p.dropStaleLocked(now)
	}
	if len(p.queue) == 0 {
		return false
	}
	cur := p.cur.Load()
	if cur.left() > 0 {
		return true
	}
	next := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	next.next.Store(next.start)
	p.cur.Store(next)
	if len(p.queue) == 0 || p.queue[len(p.queue)-1].lease == next.lease {
		p.want()
	}
	return true
}

// bufferedLocked is the IDs not yet taken (mu held).
func (p *TagPool) bufferedLocked() int64 {
	n := p.cur.Load().left()
	for _, s := range p.queue {
		n += s.end - s.start
	}
	return n
}

// Stats returns a snapshot of this tag's metrics.
func (p *TagPool) Stats() TagStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	held, stale := p.striped()
	buffered := p.bufferedLocked() + held
	retired := p.c.retired + stale + p.dropped.Load()
	return TagStats{
		Kind: p.kind, Name: p.name,
		IDsServed: p.c.leased - retired - buffered, IDsLeased: p.c.leased, IDsRetired: retired,
		IDsBuffered: buffered, LeasesOK: p.c.leasesOK, LeasesFailed: p.c.leasesFailed,
		LastLeaseSize: p.c.lastLeaseSize, LeaseTarget: p.c.target, RatePerSec: p.c.rate,
		Waits: p.c.waits, Exhausted: p.c.exhausted, Rejected: p.c.rejected, WaitTime: p.c.waitTime,
	}
}

// close stops the refill goroutine and wakes the waiting callers. A snowflake pool retires
// everything it buffers at once: with no refill goroutine left to retire ranges as they age,
// handles kept after Close would otherwise hand out IDs of any age. A segment pool's handles
// keep serving what is buffered; calls that need a lease get ErrPoolClosed.
func (p *TagPool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ready)
		p.ready = make(chan struct{})
	}
	p.mu.Unlock()
	p.stop()
	p.done.Wait()
	// After the goroutines: a lease that landed while Close ran is retired too.
	if p.kind == KindSnowflake {
		p.mu.Lock()
		p.retireAllLocked()
		p.mu.Unlock()
	}
}

// retireAllLocked retires every buffered snowflake ID: the stripes' and LocalIDs' chunks (by
// their lease time), the current span (its cursor jumps to its end) and the queue (mu held).
func (p *TagPool) retireAllLocked() {
	p.retiredBelow.Store(math.MaxInt64)
	cur := p.cur.Load()
	if old := cur.next.Swap(cur.end); old >= cur.start && old < cur.end {
		p.c.retired += cur.end - old
	}
	for _, s := range p.queue {
		p.c.retired += s.end - s.start
	}
	p.queue = nil
}
