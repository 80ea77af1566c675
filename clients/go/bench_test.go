package leaf

import (
	"sync/atomic"
	"testing"
	"time"
)

// benchIdPool is a pool over a fake source answering at once with 1,000,000-ID leases, with
// the tag "bench" warmed through take so that the hit path dominates (range switches and
// background leases stay in the loop).
func benchIdPool(b *testing.B, take func(*IdPool) (int64, error)) *IdPool {
	o := DefaultPoolOptions()
	o.InitialLease, o.MinLease, o.MaxLease = MaxRangeBatch, MaxRangeBatch, MaxRangeBatch
	o.Depth = 4
	o.MaxWait = 30 * time.Second
	pool, err := NewIdPool(&fakeSource{}, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	for i := 0; i < 3*MaxRangeBatch; i++ {
		if _, err := take(pool); err != nil {
			b.Fatal(err)
		}
	}
	return pool
}

// benchPool is benchIdPool's tag "bench", warmed through its TagPool.
func benchPool(b *testing.B) *TagPool {
	var tp *TagPool
	benchIdPool(b, func(p *IdPool) (int64, error) {
		if tp == nil {
			var err error
			if tp, err = p.Segment("bench"); err != nil {
				return 0, err
			}
		}
		return tp.NextID()
	})
	return tp
}

// parallelIDs runs 8 × GOMAXPROCS goroutines (set GOMAXPROCS=1 for exactly 8), each taking
// IDs from its own next(): ns/op is the aggregate (wall time over all IDs of all goroutines).
func parallelIDs(b *testing.B, next func() func() (int64, error)) {
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		take := next()
		var last int64
		for pb.Next() {
			id, err := take()
			if err != nil {
				b.Error(err)
				return
			}
			last = id
		}
		atomic.StoreInt64(&sink, last)
	})
}

var sink int64

// BenchmarkAtomicAdd is the baseline: a bare atomic.AddInt64 on one goroutine.
func BenchmarkAtomicAdd(b *testing.B) {
	var n int64
	for i := 0; i < b.N; i++ {
		atomic.AddInt64(&n, 1)
	}
	sink = n
}

// BenchmarkPoolNextID is TagPool.NextID on one goroutine.
func BenchmarkPoolNextID(b *testing.B) {
	tp := benchPool(b)
	b.ResetTimer()
	var last int64
	for i := 0; i < b.N; i++ {
		id, err := tp.NextID()
		if err != nil {
			b.Fatal(err)
		}
		last = id
	}
	sink = last
}

// BenchmarkIdPoolNextIDByName is IdPool.NextID(tag) on one goroutine: the handle's lookup
// (a lock-free map read) and then TagPool.NextID.
func BenchmarkIdPoolNextIDByName(b *testing.B) {
	pool := benchIdPool(b, func(p *IdPool) (int64, error) { return p.NextID("bench") })
	b.ResetTimer()
	var last int64
	for i := 0; i < b.N; i++ {
		id, err := pool.NextID("bench")
		if err != nil {
			b.Fatal(err)
		}
		last = id
	}
	sink = last
}

// BenchmarkPoolNextID8 is TagPool.NextID on 8 goroutines sharing one tag: ns/op is the
// aggregate (wall time over all IDs of all goroutines).
func BenchmarkPoolNextID8(b *testing.B) {
	tp := benchPool(b)
	parallelIDs(b, func() func() (int64, error) { return tp.NextID })
}

// BenchmarkPoolLocal8 is 8 goroutines sharing one tag, each through its own LocalIDs (64-ID
// chunks): ns/op is the aggregate.
func BenchmarkPoolLocal8(b *testing.B) {
	tp := benchPool(b)
	parallelIDs(b, func() func() (int64, error) { return tp.Local(64).NextID })
}

// BenchmarkAtomicAdd8 is the baseline of the 8-goroutine rows: 8 goroutines adding to one
// counter, aggregate.
func BenchmarkAtomicAdd8(b *testing.B) {
	var n int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			atomic.AddInt64(&n, 1)
		}
	})
	sink = n
}
