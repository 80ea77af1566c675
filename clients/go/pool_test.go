package leaf

import (
	"errors"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func fastOptions() PoolOptions {
	o := DefaultPoolOptions()
	o.MaxWait = 5 * time.Second
	o.Tick = 10 * time.Millisecond
	o.RetryMin, o.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	return o
}

func newTestPool(t *testing.T, src RangeSource, o PoolOptions) *IdPool {
	t.Helper()
	p, err := NewIdPool(src, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// leasedIDs is every ID the fake source handed out (its ranges are consecutive with gaps of 7).
func TestPoolHandsOutEveryIDOnceFromLeasedRangesAcrossGoroutines(t *testing.T) {
	src := &fakeSource{split: 3}
	o := fastOptions()
	o.InitialLease, o.MinLease, o.MaxLease = 1000, 100, 5000
	p := newTestPool(t, src, o)
	tp, err := p.Segment("t")
	if err != nil {
		t.Fatal(err)
	}
	const per = 20_000
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			got := make([]int64, 0, per)
			local := tp.Local(16)
			for i := 0; i < per; i++ {
				var id int64
				var err error
				switch g % 3 {
				case 0:
					id, err = tp.NextID()
				case 1:
					id, err = local.NextID()
				default:
					var ok bool
					if id, ok = tp.TryNextID(); !ok {
						id, err = tp.NextID()
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				got = append(got, id)
			}
			mu.Lock()
			all = append(all, got...)
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
	st := tp.Stats()
	if st.IDsLeased < int64(len(all)) || st.LeasesOK < 2 || st.IDsServed < int64(len(all)) {
		t.Errorf("books: %+v for %d IDs", st, len(all))
	}
	// Every ID lies in a range the source leased (its ranges leave gaps of 7 between them).
	if id, out := src.outsideLeases(all); out {
		t.Errorf("ID %d lies in no leased range", id)
	}
}

func TestPoolPrefetchesBeforeTheRangeRunsOut(t *testing.T) {
	src := &fakeSource{}
	o := fastOptions()
	o.InitialLease, o.MinLease, o.MaxLease = 1000, 1000, 1000
	p := newTestPool(t, src, o)
	tp, _ := p.Segment("t")
	for i := 0; i < 101; i++ { // past the 10% point of the first lease
		if _, err := tp.NextID(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the second lease, asked for at 10% of the first", 5*time.Second, func() bool { return tp.Stats().LeasesOK >= 2 })
	if st := tp.Stats(); st.Waits != 1 || st.IDsBuffered < 1000 {
		t.Errorf("only the very first take waits; the next lease is buffered ahead: %+v", st)
	}
}

func TestSizingIsRateTimesPeriodWithinBounds(t *testing.T) {
	s := sizing{min: 100, max: 1_000_000, period: time.Second}
	cases := []struct {
		current int64
		rate    float64
		waited  bool
		want    int64
	}{
		{1000, 5000, false, 5000},
		{1000, 10, false, 500},
		{150, 10, false, 100},
		{1000, 1e12, false, 1_000_000},
		{1000, 0, false, 500},
		{1_000_000, 2000, false, 500_000},
		{1000, 500, true, 2000},
		{1000, 50_000, true, 50_000},
		{800_000, 0, true, 1_000_000},
	}
	for _, c := range cases {
		if got := s.next(c.current, c.rate, c.waited); got != c.want {
			t.Errorf("next(%d, %v, %v) = %d, want %d", c.current, c.rate, c.waited, got, c.want)
		}
	}
	half := sizing{min: 1, max: 1000, period: 500 * time.Millisecond}
	if got := half.next(10, 100, false); got != 50 {
		t.Errorf("a half-second period: %d", got)
	}
	if rate(500, 250*time.Millisecond) != 2000 || rate(5, 0) != 0 {
		t.Error("rate")
	}
	if prefetchOffset(1000) != 100 {
		t.Error("prefetch at 10%")
	}
}

func TestPoolLeaseSizeFollowsConsumption(t *testing.T) {
	src := &fakeSource{}
	o := fastOptions()
	o.InitialLease, o.MinLease, o.MaxLease = 100, 100, 1_000_000
	o.LeasePeriod = 200 * time.Millisecond
	p := newTestPool(t, src, o)
	tp, _ := p.Segment("t")
	for i := 0; i < 300_000; i++ {
		if _, err := tp.NextID(); err != nil {
			t.Fatal(err)
		}
	}
	if st := tp.Stats(); st.LeaseTarget <= 1000 {
		t.Errorf("a fast consumer's leases grow: %+v", st)
	}
}

func TestPoolWaitsThenReportsExhaustedAndRecovers(t *testing.T) {
	src := &fakeSource{}
	src.setFail(&TransportError{Node: "n", Message: "down"})
	o := fastOptions()
	o.MaxWait = 150 * time.Millisecond
	p := newTestPool(t, src, o)
	tp, _ := p.Segment("t")
	started := time.Now()
	_, err := tp.NextID()
	var ex *PoolExhaustedError
	if !errors.As(err, &ex) || ex.Last == nil || time.Since(started) < o.MaxWait {
		t.Fatalf("%v after %v", err, time.Since(started))
	}
	var tr *TransportError
	if !errors.As(err, &tr) {
		t.Errorf("the last lease failure is kept: %v", err)
	}
	if _, ok := tp.TryNextID(); ok {
		t.Error("TryNextID with nothing buffered")
	}
	src.setFail(nil)
	waitFor(t, "IDs once the source answers again", 5*time.Second, func() bool {
		_, err := tp.NextID()
		return err == nil
	})
}

func TestPoolRejectsAtOnceWhenWaitingCannotHelp(t *testing.T) {
	src := &fakeSource{}
	src.setFail(&APIError{Status: 404, Code: CodeTagNotFound, Message: "no tag"})
	p := newTestPool(t, src, fastOptions())
	tp, _ := p.Segment("t")
	var rej *PoolRejectedError
	waitFor(t, "a rejection", 5*time.Second, func() bool {
		_, err := tp.NextID()
		return errors.As(err, &rej)
	})
	if !errors.Is(rej, CodeTagNotFound) {
		t.Errorf("%v", rej)
	}
	started := time.Now()
	if _, err := tp.NextID(); !errors.As(err, &rej) || time.Since(started) > time.Second {
		t.Errorf("rejected again at once: %v", err)
	}
}

func TestSnowflakeRangesAreRetiredWhenStale(t *testing.T) {
	src := &fakeSource{}
	o := fastOptions()
	o.MaxStaleness = 150 * time.Millisecond
	o.Tick = 20 * time.Millisecond
	o.InitialLease, o.MinLease, o.MaxLease = 1000, 1000, 1000
	p := newTestPool(t, src, o)
	tp, _ := p.Snowflake("k")
	local := tp.Local(64)
	first, err := tp.NextID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.NextID(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first lease retired", 5*time.Second, func() bool { return tp.Stats().IDsRetired > 0 })
	waitFor(t, "an ID of a newer lease", 5*time.Second, func() bool {
		id, err := tp.NextID()
		return err == nil && id > first+1000
	})
	id, err := local.NextID()
	if err != nil || id < first+1000 {
		t.Errorf("a local chunk of a retired lease is dropped: %d, %v", id, err)
	}
}

// poolGoroutines counts the goroutines running a TagPool's refill or lease.
func poolGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "(*TagPool).refill") || strings.Contains(g, "(*TagPool).lease") {
			count++
		}
	}
	return count
}

func TestClosingThePoolStopsItsGoroutines(t *testing.T) {
	before := poolGoroutines()
	src := &fakeSource{block: make(chan struct{})} // a lease in flight that never answers
	p, err := NewIdPool(src, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := p.Segment("a")
	p.Snowflake("b")
	// Two refill goroutines and two leases in flight (the source never answers).
	waitFor(t, "refill and lease goroutines", 5*time.Second, func() bool { return poolGoroutines() == before+4 })
	done := make(chan error, 1)
	go func() { _, err := tp.NextID(); done <- err }()
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPoolClosed) {
			t.Errorf("a waiting caller: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting caller was not woken by Close")
	}
	// Close waits for the refill and lease goroutines (a WaitGroup), whose stacks can still
	// show their frames for an instant after their deferred Done.
	waitFor(t, "the pool's goroutines to end after Close", 5*time.Second, func() bool { return poolGoroutines() == before })
	if _, err := p.Segment("c"); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("a closed pool: %v", err)
	}
}

func TestPoolOptionsAreChecked(t *testing.T) {
	if err := DefaultPoolOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*PoolOptions){
		func(o *PoolOptions) { o.MinLease = 0 },
		func(o *PoolOptions) { o.MaxLease = MaxRangeBatch + 1 },
		func(o *PoolOptions) { o.InitialLease = 1 },
		func(o *PoolOptions) { o.Depth = 0 },
		func(o *PoolOptions) { o.Depth = 17 },
		func(o *PoolOptions) { o.LeasePeriod = 0 },
		func(o *PoolOptions) { o.Tick = o.MaxStaleness },
		func(o *PoolOptions) { o.RetryMin = 2 * o.RetryMax },
		func(o *PoolOptions) { o.MaxWait = 0 },
	}
	for i, f := range bad {
		o := DefaultPoolOptions()
		f(&o)
		if _, err := NewIdPool(&fakeSource{}, o); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	p := newTestPool(t, &fakeSource{}, DefaultPoolOptions())
	if _, err := p.Segment("bad tag"); !errors.Is(err, CodeInvalidTag) {
		t.Errorf("%v", err)
	}
	a, _ := p.Segment("x")
	b, _ := p.Segment("x")
	c, _ := p.Snowflake("x")
	if a != b || a == c {
		t.Error("one buffer per kind and name")
	}
}

// Goroutines that share a stripe (here all of them: one stripe) share its chunk's cursor and
// race to install new chunks: still no ID twice, and the books balance.
func TestGoroutinesSharingAStripeTakeDistinctIDs(t *testing.T) {
	src := &fakeSource{split: 2}
	o := fastOptions()
	o.InitialLease, o.MinLease, o.MaxLease = 5000, 1000, 20000
	p := newTestPool(t, src, o)
	tp, err := p.Segment("shared-stripe")
	if err != nil {
		t.Fatal(err)
	}
	tp.stripes, tp.mask = tp.stripes[:1], 0 // before any take
	const goroutines, per = 8, 25_000
	ids := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id, err := tp.NextID()
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], id)
			}
		}(g)
	}
	wg.Wait()
	seen := make(map[int64]bool, goroutines*per)
	all := make([]int64, 0, goroutines*per)
	for _, got := range ids {
		for _, id := range got {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
			all = append(all, id)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if id, out := src.outsideLeases(all); out {
		t.Errorf("ID %d lies in no leased range", id)
	}
	st := tp.Stats()
	if st.IDsServed < int64(len(seen)) || st.IDsServed+st.IDsRetired+st.IDsBuffered != st.IDsLeased {
		t.Errorf("books: %+v for %d IDs", st, len(seen))
	}
}

// Handles of a snowflake key kept after Close hand out nothing more: no refill goroutine is
// left to retire ranges as they age. Segment handles keep serving what they buffer.
func TestAClosedSnowflakePoolHandsOutNoBufferedID(t *testing.T) {
	p, err := NewIdPool(&fakeSource{}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	flakes, _ := p.Snowflake("k")
	orders, _ := p.Segment("o")
	if _, err := flakes.NextID(); err != nil {
		t.Fatal(err)
	}
	if _, err := orders.NextID(); err != nil {
		t.Fatal(err)
	}
	local := flakes.Local(16)
	if _, err := local.NextID(); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if id, err := flakes.NextID(); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("a snowflake ID after Close: %d %v", id, err)
	}
	if id, err := local.NextID(); !errors.Is(err, ErrPoolClosed) {
		t.Errorf("a snowflake ID of a LocalIDs chunk after Close: %d %v", id, err)
	}
	if id, ok := flakes.TryNextID(); ok {
		t.Errorf("TryNextID after Close: %d", id)
	}
	if st := flakes.Stats(); st.IDsBuffered != 0 || st.IDsRetired == 0 {
		t.Errorf("books after Close: %+v", st)
	}
	if _, err := orders.NextID(); err != nil {
		t.Errorf("a buffered segment ID after Close: %v", err)
	}
}
