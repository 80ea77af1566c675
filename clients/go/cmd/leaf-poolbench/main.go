// Command leaf-poolbench prints, in one run, the IdPool hit path against a bare atomic add:
// ns/op of atomic.AddInt64 on one goroutine (and 8 on one counter), TagPool.NextID on one goroutine, and 8 goroutines
// sharing one TagPool (NextID, and a LocalIDs each), aggregate, with the ratios BENCHMARKS.md
// reports. The pool leases from an in-process source answering at once with 1,000,000-ID
// ranges, warmed first, so the hit path dominates (range switches and background leases stay in
// the timed loops). Run it with GOMAXPROCS=1 for the one-core figures:
//
//	cd clients/go && GOMAXPROCS=1 go run ./cmd/leaf-poolbench -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	leaf "leaf.dev/client"
)

// instant leases consecutive ranges at once.
type instant struct {
	mu   sync.Mutex
	next int64
}

// LeaseRanges answers the next n IDs as one range.
func (s *instant) LeaseRanges(_ context.Context, _ leaf.IDKind, _ string, n int) (leaf.IDRanges, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := leaf.IDRange{Start: s.next, End: s.next + int64(n)}
	s.next += int64(n)
	return leaf.IDRanges{Ranges: []leaf.IDRange{r}}, nil
}

var sink int64

func pool() (*leaf.IdPool, *leaf.TagPool) {
	o := leaf.DefaultPoolOptions()
	o.InitialLease, o.MinLease, o.MaxLease = leaf.MaxRangeBatch, leaf.MaxRangeBatch, leaf.MaxRangeBatch
	o.Depth = 4
	o.MaxWait = 30 * time.Second
	p, err := leaf.NewIdPool(&instant{}, o)
	if err != nil {
		fail(err)
	}
	tp, err := p.Segment("bench")
	if err != nil {
		fail(err)
	}
	for i := 0; i < 3*leaf.MaxRangeBatch; i++ {
		if _, err := tp.NextID(); err != nil {
			fail(err)
		}
	}
	return p, tp
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "leaf-poolbench:", err)
	os.Exit(1)
}

func nsPerOp(f func(b *testing.B)) float64 {
	r := testing.Benchmark(f)
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func parallel(tp *leaf.TagPool, local bool) func(b *testing.B) {
	return func(b *testing.B) {
		b.SetParallelism(8 / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			next := tp.NextID
			if local {
				next = tp.Local(64).NextID
			}
			var last int64
			for pb.Next() {
				id, err := next()
				if err != nil {
					fail(err)
				}
				last = id
			}
			atomic.StoreInt64(&sink, last)
		})
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func main() {
	rounds := flag.Int("rounds", 3, "rounds (the median is reported)")
	flag.Parse()
	procs := runtime.GOMAXPROCS(0)
	if 8%procs != 0 {
		fail(fmt.Errorf("GOMAXPROCS=%d does not divide 8 goroutines", procs))
	}
	fmt.Printf("GOMAXPROCS=%d, %s, %d rounds\n", procs, runtime.Version(), *rounds)
	var atom, atom8, one, eight, local8 []float64
	for r := 0; r < *rounds; r++ {
		p, tp := pool()
		atom = append(atom, nsPerOp(func(b *testing.B) {
			var n int64
			for i := 0; i < b.N; i++ {
				atomic.AddInt64(&n, 1)
			}
			sink = n
		}))
		atom8 = append(atom8, nsPerOp(func(b *testing.B) {
			var n int64
			b.SetParallelism(8 / procs)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					atomic.AddInt64(&n, 1)
				}
			})
			sink = n
		}))
		one = append(one, nsPerOp(func(b *testing.B) {
			var last int64
			for i := 0; i < b.N; i++ {
				id, err := tp.NextID()
				if err != nil {
					fail(err)
				}
				last = id
			}
			sink = last
		}))
		eight = append(eight, nsPerOp(parallel(tp, false)))
		local8 = append(local8, nsPerOp(parallel(tp, true)))
		p.Close()
		fmt.Printf("round %d: atomic.AddInt64 %.2f ns/op (8 goroutines on one counter: %.2f ns/op aggregate); NextID 1 goroutine %.2f ns/op (%.3f x atomic); "+
			"NextID 8 goroutines %.2f ns/op aggregate (%.3f x 1 goroutine); LocalIDs 8 goroutines %.2f ns/op aggregate (%.3f x)\n",
			r+1, atom[r], atom8[r], one[r], atom[r]/one[r], eight[r], one[r]/eight[r], local8[r], one[r]/local8[r])
	}
	a, a8, o, e, l := median(atom), median(atom8), median(one), median(eight), median(local8)
	fmt.Printf("median: atomic %.2f ns/op, atomic x8 %.2f ns/op, NextID %.2f ns/op, NextID x8 %.2f ns/op, LocalIDs x8 %.2f ns/op\n", a, a8, o, e, l)
	fmt.Printf("ratio NextID per goroutine / bare atomic add: %.3f (target >= 0.5)\n", a/o)
	fmt.Printf("ratio 8-goroutine aggregate / 1 goroutine: NextID %.3f, LocalIDs %.3f (target >= 0.5); bare atomic x8 / x1: %.3f\n", o/e, o/l, a/a8)
}
