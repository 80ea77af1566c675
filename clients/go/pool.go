package leaf

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// IdPool is a client-side cache of ID ranges leased from the cluster, per tag (Leaf's double
// buffer in the client; the Rust client's IdPool):
//
//	pool, _ := leaf.NewIdPool(client, leaf.DefaultPoolOptions())
//	defer pool.Close()
//	orders, _ := pool.Segment("orders") // starts leasing at once
//	id, err := orders.NextID()          // one atomic add while IDs are buffered
//
// Each tag (or snowflake key) has a buffer of leased ranges (format=ranges, through the
// client's failover, retries and deadline) and a refill goroutine that asks for the next lease
// once 10% of the current one is used, sizing it to last about LeasePeriod at the measured
// consumption rate. A failed lease is retried with backoff; callers notice nothing while
// buffered IDs last, then wait up to MaxWait. Every ID handed out lies in a range the service
// leased to this pool, none twice; IDs still buffered when the process dies are a gap, never a
// duplicate.
type IdPool struct {
	src     RangeSource
	options PoolOptions
	mu      sync.Mutex
	tags    map[poolKey]*TagPool
	closed  bool
	// known holds the same handles as tags for lookups without the mutex: IdPool.NextID(tag)
	// on a known tag is a lock-free map read, then the tag's one atomic add.
	known sync.Map // poolKey -> *TagPool
	shut  atomic.Bool
}

type poolKey struct {
	kind IDKind
	name string
}

// IDKind is which IDs a TagPool hands out.
type IDKind string

// The kinds of pooled IDs.
const (
	KindSegment   IDKind = "segment"
	KindSnowflake IDKind = "snowflake"
)

// RangeSource leases ranges of IDs for a pool: a *Client (SegmentRanges / SnowflakeRanges), or
// a fake in tests. LeaseRanges must return once ctx ends: Close waits for a lease in flight.
type RangeSource interface {
	LeaseRanges(ctx context.Context, kind IDKind, name string, count int) (IDRanges, error)
}

// LeaseRanges makes a *Client a RangeSource: SegmentRanges or SnowflakeRanges.
func (c *Client) LeaseRanges(ctx context.Context, kind IDKind, name string, count int) (IDRanges, error) {
	if kind == KindSnowflake {
		return c.SnowflakeRanges(ctx, name, count)
	}
	return c.SegmentRanges(ctx, name, count)
}

// PoolOptions is how an IdPool leases and waits; DefaultPoolOptions are the Rust pool's.
type PoolOptions struct {
	// MaxWait is how long a call with nothing buffered waits for a lease before a
	// *PoolExhaustedError (5 s: longer than a leader election plus the client's failover).
	MaxWait time.Duration
	// LeasePeriod is how long a lease should last at the measured consumption (1 s): the
	// next lease is rate × LeasePeriod IDs, within [MinLease, MaxLease].
	LeasePeriod time.Duration
	// MinLease (100), MaxLease (1,000,000 = MaxRangeBatch) and InitialLease (1000) bound the
	// lease size.
	MinLease, MaxLease, InitialLease int
	// Depth is how many leases may be queued behind the current range (1: Leaf's double
	// buffer).
	Depth int
	// MaxStaleness: no snowflake ID is handed out from a range more than this after its lease
	// was requested (1 s); Tick (100 ms, below MaxStaleness) is how often the refill goroutine
	// wakes on its own to retire old ranges.
	MaxStaleness, Tick time.Duration
	// RetryMin (50 ms) doubling to RetryMax (1 s) is the backoff of a failed lease.
	RetryMin, RetryMax time.Duration
}

// DefaultPoolOptions returns the defaults of the Rust client's PoolOptions.
func DefaultPoolOptions() PoolOptions {
	return PoolOptions{
		MaxWait:      5 * time.Second,
		LeasePeriod:  time.Second,
		MinLease:     100,
		MaxLease:     MaxRangeBatch,
		InitialLease: 1000,
		Depth:        1,
		MaxStaleness: time.Second,
		Tick:         100 * time.Millisecond,
		RetryMin:     50 * time.Millisecond,
		RetryMax:     time.Second,
	}
}

// Validate checks the options are usable together.
func (o PoolOptions) Validate() error {
	bad := func(format string, args ...interface{}) error {
		return &ConfigError{Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case o.MinLease < 1 || o.MinLease > o.MaxLease || o.MaxLease > MaxRangeBatch:
		return bad("need 1 <= MinLease (%d) <= MaxLease (%d) <= %d", o.MinLease, o.MaxLease, MaxRangeBatch)
	case o.InitialLease < o.MinLease || o.InitialLease > o.MaxLease:
		return bad("InitialLease (%d) must be within [MinLease, MaxLease]", o.InitialLease)
	case o.Depth < 1 || o.Depth > 16:
		return bad("Depth must be from 1 to 16, got %d", o.Depth)
	case o.LeasePeriod <= 0 || o.Tick <= 0 || o.RetryMin <= 0 || o.MaxWait <= 0:
		return bad("LeasePeriod, Tick, RetryMin and MaxWait must be above zero")
	case o.Tick >= o.MaxStaleness:
		return bad("Tick (%v) must be below MaxStaleness (%v)", o.Tick, o.MaxStaleness)
	case o.RetryMin > o.RetryMax:
		return bad("RetryMin must not exceed RetryMax")
	}
	return nil
}

// ErrPoolClosed is returned by a pool (or tag) that was closed.
var ErrPoolClosed = errors.New("leaf: the ID pool is closed")

// PoolExhaustedError is a call that found nothing buffered and no lease arriving within
// MaxWait. Last is the last lease failure (nil: the lease was only slow).
type PoolExhaustedError struct {
	Kind   IDKind
	Name   string
	Waited time.Duration
	Last   error
}

// Error describes the failure (never with the token).
func (e *PoolExhaustedError) Error() string {
	why := "no lease arrived in time"
	if e.Last != nil {
		why = e.Last.Error()
	}
	return fmt.Sprintf("no %s ID of %q within %v: %s", e.Kind, e.Name, e.Waited, why)
}

// Unwrap returns the last lease failure.
func (e *PoolExhaustedError) Unwrap() error { return e.Last }

// PoolRejectedError is a call that found nothing buffered while the last lease was refused
// for a reason waiting does not fix (an unknown tag, a rejected token, a TLS setup problem):
// returned at once. The refill goroutine keeps trying with backoff, so a later call succeeds
// once the cause is gone.
type PoolRejectedError struct {
	Kind IDKind
	Name string
	Err  error
}

// Error describes the failure (never with the token).
func (e *PoolRejectedError) Error() string {
	return fmt.Sprintf("%s IDs of %q refused: %v", e.Kind, e.Name, e.Err)
}

// Unwrap returns the lease's error.
func (e *PoolRejectedError) Unwrap() error { return e.Err }

// NewIdPool returns a pool leasing from src (usually a *Client).
func NewIdPool(src RangeSource, options PoolOptions) (*IdPool, error) {
	if src == nil {
		return nil, &ConfigError{Message: "NewIdPool: no range source"}
	}
	if err := options.Validate(); err != nil {
		return nil, err
	}
	return &IdPool{src: src, options: options, tags: map[poolKey]*TagPool{}}, nil
}

// Options returns the options the pool was built with.
func (p *IdPool) Options() PoolOptions { return p.options }

// Segment returns the buffer of tag's segment IDs; the first call starts leasing at once, later
// calls return the same buffer.
func (p *IdPool) Segment(tag string) (*TagPool, error) { return p.handle(KindSegment, tag) }

// Snowflake returns the buffer of snowflake IDs leased under key (validated like a tag); IDs
// are at most MaxStaleness old.
func (p *IdPool) Snowflake(key string) (*TagPool, error) { return p.handle(KindSnowflake, key) }

// NextID is Segment(tag) then NextID().
func (p *IdPool) NextID(tag string) (int64, error) {
	t, err := p.Segment(tag)
	if err != nil {
		return 0, err
	}
	return t.NextID()
}

// Stats returns a snapshot of every tag's and key's metrics, in kind and name order.
func (p *IdPool) Stats() []TagStats {
	p.mu.Lock()
	pools := make([]*TagPool, 0, len(p.tags))
	for _, t := range p.tags {
		pools = append(pools, t)
	}
	p.mu.Unlock()
	sort.Slice(pools, func(i, j int) bool {
		if pools[i].kind != pools[j].kind {
			return pools[i].kind < pools[j].kind
		}
		return pools[i].name < pools[j].name
	})
	out := make([]TagStats, len(pools))
	for i, t := range pools {
		out[i] = t.Stats()
	}
	return out
}

// Close stops every refill goroutine (waiting for them, and abandoning a lease in flight: its
// IDs are a gap) and retires every buffered snowflake ID; later calls that need a lease, and
// every snowflake call, return ErrPoolClosed. A segment handle still hands out what it buffered.
func (p *IdPool) Close() {
	p.mu.Lock()
	p.closed = true
	p.shut.Store(true)
	pools := make([]*TagPool, 0, len(p.tags))
	for _, t := range p.tags {
		pools = append(pools, t)
	}
	p.mu.Unlock()
	for _, t := range pools {
		t.close()
	}
}

func (p *IdPool) handle(kind IDKind, name string) (*TagPool, error) {
	if t, ok := p.known.Load(poolKey{kind, name}); ok && !p.shut.Load() {
		return t.(*TagPool), nil
	}
	what := "tag"
	if kind == KindSnowflake {
		what = "snowflake key"
	}
	if err := validTag(name, what); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	k := poolKey{kind, name}
	if t, ok := p.tags[k]; ok {
		return t, nil
	}
	t := newTagPool(kind, name, p.src, p.options)
	p.tags[k] = t
	p.known.Store(k, t)
	return t, nil
}
