package leaf

import (
	"sync/atomic"
	"testing"
	"time"
)

// benchPool is a pool over a fake source answering at once with 1,000,000-ID leases, warmed
// so that the hit path dominates (range switches and background leases stay in the loop).
func benchPool(b *testing.B) *TagPool {
	o := DefaultPoolOptions()
	o.InitialLease, o.MinLease, o.MaxLease = MaxRangeBatch, MaxRangeBatch, MaxRangeBatch
	o.Depth = 4
	o.MaxWait = 30 * time.Second
	pool, err := NewIdPool(&fakeSource{}, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	tp, err := pool.Segment("bench")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 3*MaxRangeBatch; i++ {
		if _, err := tp.NextID(); err != nil {
			b.Fatal(err)
		}
	}
	return tp
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
		if _, err := pool.NextID("bench"); err != nil {
			b.Fatal(err)
		}
	}
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
	b.SetParallelism(8) // 8 × GOMAXPROCS goroutines: set GOMAXPROCS=1 for exactly 8
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var last int64
		for pb.Next() {
			id, err := tp.NextID()
			if err != nil {
				b.Error(err)
				return
			}
			last = id
		}
		atomic.StoreInt64(&sink, last)
	})
}

// BenchmarkPoolLocal8 is 8 goroutines sharing one tag, each through its own LocalIDs (64-ID
// chunks): ns/op is the aggregate.
func BenchmarkPoolLocal8(b *testing.B) {
	tp := benchPool(b)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := tp.Local(64)
		var last int64
		for pb.Next() {
			id, err := l.NextID()
			if err != nil {
				b.Error(err)
				return
			}
			last = id
		}
		atomic.StoreInt64(&sink, last)
	})
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
