package leaf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The 3-node TLS cluster: HTTPS with the cluster CA (and a TLS error without it), and the
// must-show: goroutines taking IDs through a Client and through an IdPool while the leader is
// killed with SIGKILL, then (once it is back) the node the client talks to; zero application
// errors, every ID unique and inside an allocation the cluster committed.

// taker is one application goroutine's IDs and errors.
type taker struct {
	ids    []int64
	errs   []string
	taken  atomic.Int64
	finish chan struct{}
}

func runTaker(stop <-chan struct{}, batch int, next func() (int64, error)) *taker {
	tk := &taker{finish: make(chan struct{})}
	go func() {
		defer close(tk.finish)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := 0; i < batch; i++ {
				id, err := next()
				if err != nil {
					tk.errs = append(tk.errs, err.Error())
					continue
				}
				tk.ids = append(tk.ids, id)
			}
			tk.taken.Add(int64(batch))
			time.Sleep(time.Millisecond) // an application's pace, not a wait for a condition
		}
	}()
	return tk
}

func TestClusterFailover(t *testing.T) {
	d := startCluster(t, 3)
	rnd := seeded(t)
	ctx := context.Background()
	leader := d.waitLeaderAmong([]int{1, 2, 3}, 30*time.Second)

	t.Run("https with the CA, a TLS error without it", func(t *testing.T) {
		c, err := New(d.urls(), WithCAFile(d.ca), WithToken(d.token))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if h, err := c.Health(ctx, HealthAll); err != nil || !h.Ready {
			t.Fatalf("%+v %v", h, err)
		}
		noCA, _ := New(d.urls(), WithRetries(10), WithDeadline(30*time.Second))
		started := time.Now()
		_, err = noCA.SegmentID(ctx, quickTag)
		var gave *GaveUpError
		var tlsErr *TLSError
		if !errors.As(err, &gave) || gave.Attempts != 3 || !errors.As(err, &tlsErr) || !strings.Contains(err.Error(), "not trusted") {
			t.Errorf("%v", err)
		}
		if time.Since(started) > 10*time.Second {
			t.Error("a TLS failure is not retried until the deadline")
		}
	})

	// The node IDs in a random order of the survivors (the seed is printed).
	others := []int{}
	for i := 1; i <= 3; i++ {
		if i != leader {
			others = append(others, i)
		}
	}
	rnd.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	first, other := others[0], others[1]

	admin, err := New([]string{d.url(leader)}, WithCAFile(d.ca), WithToken(d.token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTag(ctx, CreateTagRequest{Tag: "go-pooled", Step: 1000}); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	urls := []string{dead, d.url(first), d.url(leader), d.url(other)}
	nodeOf := map[string]int{d.url(first): first, d.url(leader): leader, d.url(other): other}
	client, err := New(urls, WithCAFile(d.ca), WithTimeout(2*time.Second), WithDeadline(10*time.Second),
		WithRetries(10), WithBackoff(20*time.Millisecond, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	o := DefaultPoolOptions()
	o.LeasePeriod, o.InitialLease, o.MaxLease, o.MaxWait = 300*time.Millisecond, 500, 50_000, 15*time.Second
	pool, err := NewIdPool(client, o)
	if err != nil {
		t.Fatal(err)
	}
	orders, _ := pool.Segment("go-pooled")
	flakes, _ := pool.Snowflake("go-pooled-key")

	stop := make(chan struct{})
	local := orders.Local(64)
	pooled := []*taker{runTaker(stop, 100, orders.NextID), runTaker(stop, 100, local.NextID)}
	flakeTaker := runTaker(stop, 20, flakes.NextID)
	direct := []*taker{
		runTaker(stop, 1, func() (int64, error) { return client.SegmentID(ctx, "go-pooled") }),
		runTaker(stop, 1, func() (int64, error) { return client.SegmentID(ctx, "go-pooled") }),
	}
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		close(stop)
		for _, tk := range append(append(pooled, direct...), flakeTaker) {
			<-tk.finish
		}
		pool.Close()
	}
	t.Cleanup(stopAll)
	sum := func(ts []*taker) int64 {
		var n int64
		for _, tk := range ts {
			n += tk.taken.Load()
		}
		return n
	}
	progress := func(what string, pooledMore, directMore int64) {
		t.Helper()
		p0, d0 := sum(pooled), sum(direct)
		waitFor(t, what, 60*time.Second, func() bool {
			return sum(pooled) >= p0+pooledMore && sum(direct) >= d0+directMore
		})
	}

	progress("IDs before the kill", 30_000, 50)
	d.nodes[leader].kill()
	t.Logf("killed the leader, node %d", leader)
	newLeader := d.waitLeaderAmong([]int{first, other}, 30*time.Second)
	progress("IDs after the leader's kill", 60_000, 100)
	d.nodes[leader].start(t)
	d.waitReady([]int{leader}, 60*time.Second)
	progress("IDs after the restart", 30_000, 50)
	talksTo := nodeOf[client.Nodes()[client.Preferred()]]
	d.nodes[talksTo].kill()
	t.Logf("new leader %d; killed node %d, the one the client talks to", newLeader, talksTo)
	rest := []int{}
	for _, i := range []int{first, leader, other} {
		if i != talksTo {
			rest = append(rest, i)
		}
	}
	d.waitLeaderAmong(rest, 30*time.Second)
	progress("IDs after the client's node's kill", 60_000, 100)
	stopAll()

	var errs []string
	var all []int64
	for _, tk := range append(append([]*taker{}, pooled...), direct...) {
		errs = append(errs, tk.errs...)
		all = append(all, tk.ids...)
	}
	errs = append(errs, flakeTaker.errs...)
	if len(errs) > 0 {
		t.Fatalf("the application saw %d errors, first: %s", len(errs), errs[0])
	}
	assertUnique(t, "segment", all)
	assertUnique(t, "snowflake", append([]int64(nil), flakeTaker.ids...))
	if len(flakeTaker.ids) == 0 {
		t.Error("the snowflake goroutine took no ID")
	}
	assertInsideCommittedAllocations(t, d, rest[0], "go-pooled", all)
	st := orders.Stats()
	if st.LeasesOK < 5 {
		t.Errorf("%+v", st)
	}
	t.Logf("%d segment IDs (%d through the client), %d snowflake IDs; pool %+v", len(all), sum(direct), len(flakeTaker.ids), st)
}

func assertUnique(t *testing.T, what string, ids []int64) {
	t.Helper()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("%s ID %d handed out twice (of %d)", what, ids[i], len(ids))
		}
	}
}

// assertInsideCommittedAllocations checks every ID lies in a range [start, end) the cluster
// committed for tag, as node id (alive, its journal complete) applied them.
func assertInsideCommittedAllocations(t *testing.T, d *deployment, id int, tag string, ids []int64) {
	t.Helper()
	req, _ := http.NewRequest("GET", d.url(id)+"/admin/allocations?tag="+tag, nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := d.probe().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var journal struct {
		CompleteFromIndex int64 `json:"complete_from_index"`
		Allocations       []struct {
			Start int64 `json:"start"`
			End   int64 `json:"end"`
		} `json:"allocations"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&journal) != nil || journal.CompleteFromIndex != 0 {
		t.Fatalf("the allocation journal: HTTP %d, from index %d", resp.StatusCode, journal.CompleteFromIndex)
	}
	a := journal.Allocations
	sort.Slice(a, func(i, j int) bool { return a[i].Start < a[j].Start })
	for _, v := range ids { // ids are sorted
		i := sort.Search(len(a), func(i int) bool { return a[i].Start > v }) - 1
		if i < 0 || v >= a[i].End {
			t.Fatalf("ID %d is in no allocation the cluster committed", v)
		}
	}
}
