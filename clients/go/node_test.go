package leaf

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// Every call against one real plaintext node (one node for all subtests: startup is the cost).

const quickTag = "leaf-segment-test"

func TestSingleNode(t *testing.T) {
	d := startSingle(t)
	c, err := New(d.urls(), WithToken(d.token), WithTimeout(5*time.Second), WithDeadline(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	t.Run("segment IDs, batches and ranges", func(t *testing.T) {
		a, err := c.SegmentID(ctx, quickTag)
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.SegmentIDs(ctx, quickTag, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(batch) != 500 || !sort.SliceIsSorted(batch, func(i, j int) bool { return batch[i] < batch[j] }) || batch[0] <= a {
			t.Fatalf("batch %v.. after %d", batch[:3], a)
		}
		r, err := c.SegmentRanges(ctx, quickTag, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		got := r.IDs()
		if len(got) != 10_000 || got[0] <= batch[len(batch)-1] {
			t.Fatalf("%d IDs from %d", len(got), got[0])
		}
		seen := map[int64]bool{a: true}
		for _, id := range append(batch, got...) {
			if seen[id] {
				t.Fatalf("ID %d twice", id)
			}
			seen[id] = true
		}
	})

	t.Run("snowflake IDs, ranges and decode", func(t *testing.T) {
		one, err := c.SnowflakeID(ctx, "go-key")
		if err != nil {
			t.Fatal(err)
		}
		many, err := c.SnowflakeIDs(ctx, "go-key", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(many) != 1000 || many[0] <= one {
			t.Fatalf("%d IDs, first %d after %d", len(many), many[0], one)
		}
		r, err := c.SnowflakeRanges(ctx, "go-key", 50_000)
		if err != nil {
			t.Fatal(err)
		}
		if r.Len() != 50_000 || r.Ranges[0].Start <= many[len(many)-1] {
			t.Fatalf("ranges %v", r.Ranges[:1])
		}
		dec, err := c.Decode(ctx, one)
		if err != nil {
			t.Fatal(err)
		}
		if dec.ID != one || dec.TimestampMs < 1_600_000_000_000 || dec.WorkerID < 0 || dec.WorkerID >= 1024 || !strings.HasSuffix(dec.Timestamp, "Z") {
			t.Errorf("%+v", dec)
		}
	})

	t.Run("health", func(t *testing.T) {
		h, err := c.Health(ctx, HealthAll)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Ready || h.NodeID != 1 || h.LeaderID == nil || *h.LeaderID != 1 || h.Snowflake["state"] != "serving" {
			t.Errorf("%+v", h)
		}
		for _, m := range []HealthMode{HealthSegment, HealthSnowflake} {
			if h, err := c.Health(ctx, m); err != nil || !h.Ready {
				t.Errorf("%s: %+v %v", m, h, err)
			}
		}
		if h, _ := c.Health(ctx, HealthSegment); h.SegmentReady == nil || !*h.SegmentReady {
			t.Errorf("segment_ready: %+v", h)
		}
	})

	t.Run("tags: create, get, archive, restore", func(t *testing.T) {
		start := int64(5000)
		info, err := c.CreateTag(ctx, CreateTagRequest{Tag: "go-orders", Step: 100, MaxID: &start, Description: "go test"})
		if err != nil {
			t.Fatal(err)
		}
		if info.Tag != "go-orders" || info.Step != 100 || info.MaxID != 5000 || info.Raw["profile"] == nil {
			t.Errorf("%+v", info)
		}
		if !c.OwnCreates().WithinGrace("go-orders") {
			t.Error("a create is remembered")
		}
		first, err := c.SegmentID(ctx, "go-orders")
		if err != nil || first < 5000 {
			t.Fatalf("%d %v", first, err)
		}
		got, err := c.Tag(ctx, "go-orders")
		if err != nil || got.Description != "go test" || got.MaxID <= 5000 {
			t.Fatalf("%+v %v", got, err)
		}
		_, err = c.CreateTag(ctx, CreateTagRequest{Tag: "go-orders", Step: 100})
		var api *APIError
		if !errors.As(err, &api) || api.Code != CodeTagExists || api.Status != 409 {
			t.Errorf("a second create: %v", err)
		}
		archived, err := c.ArchiveTag(ctx, "go-orders")
		if err != nil || archived.ArchivedMs == nil {
			t.Fatalf("%+v %v", archived, err)
		}
		if c.OwnCreates().WithinGrace("go-orders") {
			t.Error("an archive forgets the create")
		}
		if _, err := c.SegmentID(ctx, "go-orders"); err == nil {
			t.Error("IDs of an archived tag")
		}
		again, err := c.ArchiveTag(ctx, "go-orders")
		if err != nil || again.ArchivedMs == nil {
			t.Errorf("archiving twice is idempotent: %v", err)
		}
		restored, err := c.RestoreTag(ctx, "go-orders")
		if err != nil || restored.ArchivedMs != nil {
			t.Fatalf("%+v %v", restored, err)
		}
		if id, err := c.SegmentID(ctx, "go-orders"); err != nil || id <= first {
			t.Errorf("after a restore: %d %v", id, err)
		}
	})

	t.Run("errors are typed", func(t *testing.T) {
		_, err := c.SegmentID(ctx, "go-no-such-tag")
		var api *APIError
		if !errors.As(err, &api) || api.Code != CodeTagNotFound || api.Status != 404 || api.LeafCode == nil || *api.LeafCode != -2 || api.Node != d.url(1) {
			t.Errorf("%#v", err)
		}
		var gave *GaveUpError
		if errors.As(err, &gave) || !errors.Is(err, CodeTagNotFound) {
			t.Error("a 404 is the answer: not retried")
		}
		bad, err := New(d.urls(), WithToken("wrong-token-0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Tag(ctx, quickTag)
		if !errors.Is(err, CodeUnauthorized) || strings.Contains(err.Error(), "wrong-token") {
			t.Errorf("a wrong token: %v", err)
		}
		if strings.Contains(bad.String(), "wrong-token") || strings.Contains(c.String(), d.token) {
			t.Error("a token in String()")
		}
	})

	t.Run("gapless issue, reserve, confirm, void", func(t *testing.T) {
		if _, err := c.CreateTag(ctx, CreateTagRequest{Tag: "go-inv", Step: 1, Profile: "gapless"}); err != nil {
			t.Fatal(err)
		}
		a, err := c.IssueNumber(ctx, "go-inv", "order-1")
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.IssueNumber(ctx, "go-inv", "order-1")
		if err != nil || a.Number != 1 || again.Number != 1 || a.Replayed || !again.Replayed || a.State != StateIssued {
			t.Fatalf("%v %v %v", a, again, err)
		}
		r, err := c.ReserveNumber(ctx, "go-inv", "order-2", 600)
		if err != nil || r.Number != 2 || r.State != StateReserved || r.DeadlineMs == nil {
			t.Fatalf("%v %v", r, err)
		}
		conf, err := c.ConfirmNumber(ctx, "go-inv", "order-2")
		if err != nil || conf.Number != 2 || conf.State != StateConfirmed {
			t.Fatalf("%v %v", conf, err)
		}
		r3, err := c.ReserveNumber(ctx, "go-inv", "order-3", 0)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.VoidNumber(ctx, "go-inv", "order-3", "customer cancelled")
		if err != nil || v.Number != 3 || r3.Number != 3 || v.State != StateVoided || v.Reason == nil || *v.Reason != "customer cancelled" {
			t.Fatalf("%v %v", v, err)
		}
		if _, err := c.ConfirmNumber(ctx, "go-inv", "never-reserved"); !errors.Is(err, CodeNumberNotFound) {
			t.Errorf("%v", err)
		}
		if _, err := c.SegmentID(ctx, "go-inv"); !errors.Is(err, CodeWrongProfile) {
			t.Errorf("%v", err)
		}
		// Without a token the client sends its settlement secret; this node keeps
		// auth.anonymous_gapless off, so the answer is a typed 401.
		anon, err := New(d.urls())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anon.IssueNumber(ctx, "go-inv", "order-4"); !errors.Is(err, CodeUnauthorized) {
			t.Errorf("anonymous gapless: %v", err)
		}
	})

	t.Run("pool over the node", func(t *testing.T) {
		pool, err := NewIdPool(c, DefaultPoolOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		seen := map[int64]bool{}
		for i := 0; i < 20_000; i++ {
			id, err := pool.NextID(quickTag)
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("ID %d twice", id)
			}
			seen[id] = true
		}
		sf, err := pool.Snowflake("go-pool-key")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sf.NextID(); err != nil {
			t.Fatal(err)
		}
		missing, _ := pool.Segment("go-pool-missing")
		if _, err := missing.NextID(); !errors.Is(err, CodeTagNotFound) {
			t.Errorf("an unknown tag: %v", err)
		} else {
			var rej *PoolRejectedError
			if !errors.As(err, &rej) {
				t.Errorf("refused at once: %v", err)
			}
		}
		st := pool.Stats()
		if len(st) != 3 || st[1].Name != quickTag || st[1].LeasesOK < 1 || st[1].IDsServed < 20_000 || st[0].Rejected != 1 {
			t.Errorf("%+v", st)
		}
	})

	t.Run("failover past a dead address", func(t *testing.T) {
		dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		fc, err := New([]string{dead, d.url(1)}, WithTimeout(2*time.Second), WithDeadline(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fc.SegmentID(ctx, quickTag); err != nil {
			t.Fatal(err)
		}
		if fc.Preferred() != 1 {
			t.Error("later calls start at the node that answered")
		}
		allDead, _ := New([]string{dead}, WithTimeout(time.Second), WithDeadline(5*time.Second), WithRetries(2), WithBackoff(time.Millisecond, 10*time.Millisecond))
		_, err = allDead.SegmentID(ctx, quickTag)
		var gave *GaveUpError
		var tr *TransportError
		if !errors.As(err, &gave) || gave.Attempts != 3 || !errors.As(err, &tr) || !tr.Connect || !IsUnavailable(err) {
			t.Errorf("%v", err)
		}
	})

	t.Run("a cancelled context ends the call", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.SegmentID(cctx, quickTag); !errors.Is(err, context.Canceled) {
			t.Errorf("%v", err)
		}
	})
}
