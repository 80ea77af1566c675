package leaf

import (
	"errors"
	"fmt"
	"time"
)

// The refill goroutine of one tag: leases ranges ahead of use (one lease in flight at a time,
// on a goroutine of its own so the tick keeps retiring stale snowflake ranges while a lease is
// slow), sizes them, retries failed leases with backoff, and retires stale snowflake ranges.

// leaseResult is what a lease goroutine brings back.
type leaseResult struct {
	size   int64
	sent   time.Time
	ranges IDRanges
	err    error
}

func (p *TagPool) refill() {
	defer p.done.Done()
	ticker := time.NewTicker(p.o.Tick)
	defer ticker.Stop()
	results := make(chan leaseResult, 1)
	target := p.sizing.clamp(int64(p.o.InitialLease))
	inflight := false
	failures := 0
	var retryAt, lastRequest time.Time
	var servedThen, waitsThen int64
	var leaseID uint64
	p.mu.Lock()
	p.c.target = target
	p.mu.Unlock()
	for {
		p.mu.Lock()
		now := time.Now()
		if p.kind == KindSnowflake {
			p.retireLocked(now)
		}
		due := retryAt.IsZero() || !now.Before(retryAt)
		if !inflight && due && !p.closed && p.needsLeaseLocked() {
			if failures == 0 {
				served := p.c.leased - p.c.retired - p.bufferedLocked()
				if !lastRequest.IsZero() {
					p.c.rate = rate(served-servedThen, now.Sub(lastRequest))
					target = p.sizing.next(target, p.c.rate, p.c.waits > waitsThen)
					p.c.target = target
				}
				lastRequest, servedThen, waitsThen = now, served, p.c.waits
			}
			retryAt = time.Time{}
			inflight = true
			p.done.Add(1)
			go p.lease(target, now, results)
		}
		p.mu.Unlock()
		var retryC <-chan time.Time
		var timer *time.Timer
		if !retryAt.IsZero() {
			timer = time.NewTimer(time.Until(retryAt))
			retryC = timer.C
		}
		select {
		case r := <-results:
			inflight = false
			leaseID++
			if p.landed(r, leaseID) {
				failures = 0
			} else {
				failures++
				retryAt = time.Now().Add(leaseBackoff(failures, p.o.RetryMin, p.o.RetryMax))
			}
		case <-p.wake:
		case <-ticker.C:
		case <-retryC:
		case <-p.ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// lease asks the source for size IDs and brings the answer back.
func (p *TagPool) lease(size int64, sent time.Time, results chan<- leaseResult) {
	defer p.done.Done()
	r, err := p.src.LeaseRanges(p.ctx, p.kind, p.name, int(size))
	results <- leaseResult{size: size, sent: sent, ranges: r, err: err}
}

// needsLeaseLocked: fewer than Depth leases are queued behind the current range, and a take
// asked for one or nothing is left (mu held).
func (p *TagPool) needsLeaseLocked() bool {
	cur := p.cur.Load()
	ahead := 0
	var last *leaseInfo
	for _, s := range p.queue {
		if s.lease != cur.lease && s.lease != last {
			ahead++
			last = s.lease
		}
	}
	if ahead >= p.o.Depth {
		p.wanted.Store(false)
		return false
	}
	return p.wanted.Swap(false) || p.bufferedLocked() == 0
}

// landed books a lease's outcome and wakes the waiting callers; false for a failed lease.
func (p *TagPool) landed(r leaseResult, id uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() {
		close(p.ready)
		p.ready = make(chan struct{})
	}()
	now := time.Now()
	err := r.err
	if err == nil {
		if bad := r.ranges.Check(r.size); bad != nil {
			err = fmt.Errorf("a malformed lease: %v", bad)
		} else if p.kind == KindSnowflake && !r.sent.After(now.Add(-(p.o.MaxStaleness - p.o.Tick))) {
			p.c.leased += r.size
			p.c.retired += r.size
			err = fmt.Errorf("a lease took %v: its snowflake IDs were too old to hand out", now.Sub(r.sent))
		}
	}
	if err != nil {
		p.c.leasesFailed++
		p.failure = err
		p.rejected = !leaseRetryable(err)
		return false
	}
	info := &leaseInfo{id: id, size: int(r.size), sent: r.sent}
	pre := prefetchOffset(r.size)
	var offset int64
	for _, x := range r.ranges.Ranges {
		s := &span{start: x.Start, end: x.End, prefetch: -1, lease: info}
		s.next.Store(x.Start)
		if pre >= offset && pre < offset+x.Len() {
			s.prefetch = x.Start + (pre - offset)
		}
		offset += x.Len()
		p.queue = append(p.queue, s)
	}
	p.c.leased += r.size
	p.c.leasesOK++
	p.c.lastLeaseSize = r.size
	p.failure = nil
	p.rejected = false
	p.advanceLocked(now)
	return true
}

// leaseRetryable: a lease failure that waiting may fix (no answer, a 503, a malformed answer)
// rather than a refusal (an unknown tag, a bad token, a TLS setup problem, a bad argument).
func leaseRetryable(err error) bool {
	var tlsErr *TLSError
	var api *APIError
	var inv *InvalidArgumentError
	switch {
	case errors.As(err, &tlsErr), errors.As(err, &inv):
		return false
	case errors.As(err, &api):
		return api.Status == 503
	}
	return true
}

// retireLocked drops snowflake ranges leased MaxStaleness − Tick ago or earlier: the current
// one (its cursor jumps to its end: a take that added before the jump got its ID, every later
// one misses) and queued ones (mu held).
func (p *TagPool) retireLocked(now time.Time) {
	cutoff := now.Add(-(p.o.MaxStaleness - p.o.Tick))
	if c := int64(cutoff.Sub(p.epoch)) + 1; c > p.retiredBelow.Load() {
		p.retiredBelow.Store(c)
	}
	cur := p.cur.Load()
	if cur.end > cur.start && !cur.lease.sent.After(cutoff) {
		if old := cur.next.Swap(cur.end); old >= cur.start && old < cur.end {
			p.c.retired += cur.end - old
		}
	}
	p.dropStaleLocked(now)
	if cur.left() == 0 {
		p.advanceLocked(now)
	}
}

// dropStaleLocked drops queued snowflake spans too old to hand out (mu held).
func (p *TagPool) dropStaleLocked(now time.Time) {
	cutoff := now.Add(-(p.o.MaxStaleness - p.o.Tick))
	i := 0
	for i < len(p.queue) && !p.queue[i].lease.sent.After(cutoff) {
		p.c.retired += p.queue[i].end - p.queue[i].start
		p.queue[i] = nil
		i++
	}
	p.queue = p.queue[i:]
}
