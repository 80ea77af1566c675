package leaf

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The attempt loop against in-process HTTP servers that misbehave on purpose: which failures
// are retried and how often, timeouts, deadlines, contexts, bounded answers and TLS failures.

type fakeNode struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newFakeNode(t *testing.T, h func(n int64, w http.ResponseWriter, r *http.Request)) *fakeNode {
	f := &fakeNode{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(f.hits.Add(1), w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func errorBody(w http.ResponseWriter, status int, code ErrorCode) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"code":%q,"message":"fake","leaf_code":null}`, code)
}

// hang answers nothing until the client gives up (or the server closes).
func hang(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body) // then the server notices the client leaving
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func fastClient(t *testing.T, nodes []string, opts ...Option) *Client {
	opts = append([]Option{WithTimeout(300 * time.Millisecond), WithDeadline(5 * time.Second), WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)
	c, err := New(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTransient503sMoveOnToTheNextNode(t *testing.T) {
	busy := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { errorBody(w, 503, CodeUnavailable) })
	good := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "77") })
	c := fastClient(t, []string{busy.srv.URL, good.srv.URL})
	id, err := c.SegmentID(context.Background(), "t")
	if err != nil || id != 77 || busy.hits.Load() != 1 || good.hits.Load() != 1 || c.Preferred() != 1 {
		t.Fatalf("%d %v busy=%d good=%d", id, err, busy.hits.Load(), good.hits.Load())
	}
	// The next call starts at the node that answered.
	if _, err := c.SegmentID(context.Background(), "t"); err != nil || busy.hits.Load() != 1 {
		t.Errorf("%v busy=%d", err, busy.hits.Load())
	}
}

func TestRetriesAreBoundedAndOnlyForTransientErrors(t *testing.T) {
	busy := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { errorBody(w, 503, CodeNotReady) })
	c := fastClient(t, []string{busy.srv.URL}, WithRetries(4))
	_, err := c.SegmentIDs(context.Background(), "t", 5)
	var gave *GaveUpError
	if !errors.As(err, &gave) || gave.Attempts != 5 || busy.hits.Load() != 5 || !errors.Is(err, CodeNotReady) {
		t.Fatalf("%v after %d requests", err, busy.hits.Load())
	}
	for _, code := range []ErrorCode{CodeWorkerIDsExhausted, CodeTagNotFound, CodeRateLimited} {
		code := code
		f := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { errorBody(w, code.Status(), code) })
		c := fastClient(t, []string{f.srv.URL, f.srv.URL})
		_, err := c.SegmentID(context.Background(), "t")
		if !errors.Is(err, code) || errors.As(err, &gave) || f.hits.Load() != 1 {
			t.Errorf("%s: %v after %d requests", code, err, f.hits.Load())
		}
	}
	proxy := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.WriteHeader(503)
			fmt.Fprint(w, "<html>bad gateway</html>")
			return
		}
		fmt.Fprint(w, "5")
	})
	if id, err := fastClient(t, []string{proxy.srv.URL}).SegmentID(context.Background(), "t"); err != nil || id != 5 {
		t.Errorf("a 503 without an error body is retried: %v", err)
	}
}

func TestCreatingATagIsNotRetriedOnceItMayHaveArrived(t *testing.T) {
	slow := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { hang(w, r) })
	c := fastClient(t, []string{slow.srv.URL, slow.srv.URL}, WithRetries(5))
	_, err := c.CreateTag(context.Background(), CreateTagRequest{Tag: "t", Step: 10})
	var to *TimeoutError
	if !errors.As(err, &to) || slow.hits.Load() != 1 {
		t.Fatalf("a create whose answer was lost: %v after %d requests", err, slow.hits.Load())
	}
	// An idempotent read on the same node is retried.
	_, err = c.Tag(context.Background(), "t")
	var gave *GaveUpError
	if !errors.As(err, &gave) || !errors.As(err, &to) || slow.hits.Load() != 1+6 {
		t.Fatalf("a read: %v after %d requests", err, slow.hits.Load())
	}
	// A create that never left (connection refused) moves on to the next node.
	dead := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	ok := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"tag":"t","max_id":1,"step":10,"description":"","created_ms":1,"updated_ms":1}`)
	})
	if _, err := fastClient(t, []string{dead, ok.srv.URL}).CreateTag(context.Background(), CreateTagRequest{Tag: "t", Step: 10}); err != nil {
		t.Errorf("a create past a refused connection: %v", err)
	}
}

func TestTheDeadlineAndTheContextBoundACall(t *testing.T) {
	slow := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { hang(w, r) })
	c := fastClient(t, []string{slow.srv.URL}, WithTimeout(5*time.Second), WithDeadline(400*time.Millisecond), WithRetries(100))
	started := time.Now()
	_, err := c.SegmentID(context.Background(), "t")
	if took := time.Since(started); took > 3*time.Second || !IsUnavailable(err) {
		t.Errorf("the deadline: %v after %v", err, took)
	}
	c2 := fastClient(t, []string{slow.srv.URL}, WithTimeout(5*time.Second), WithDeadline(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	started = time.Now()
	_, err = c2.SegmentID(ctx, "t")
	if took := time.Since(started); took > 3*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the context's deadline: %v after %v", err, took)
	}
}

func TestAnswersAreBoundedAndChecked(t *testing.T) {
	huge := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("1\n", 1<<19)
		for i := 0; i < 17; i++ {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
	})
	c := fastClient(t, []string{huge.srv.URL}, WithTimeout(10*time.Second))
	_, err := c.SegmentIDs(context.Background(), "t", 100)
	var dec *DecodeError
	if !errors.As(err, &dec) || !strings.Contains(dec.Message, "more than") {
		t.Errorf("a 17 MiB answer: %v", err)
	}
	short := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "1\n2\n") })
	if _, err := fastClient(t, []string{short.srv.URL}).SegmentIDs(context.Background(), "t", 3); !errors.As(err, &dec) {
		t.Errorf("2 IDs for 3: %v", err)
	}
}

func TestATagThisClientJustCreatedIsRetriedThroughTagNotFound(t *testing.T) {
	lagging := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n <= 3 {
			errorBody(w, 404, CodeTagNotFound)
			return
		}
		fmt.Fprint(w, "9")
	})
	c := fastClient(t, []string{lagging.srv.URL}, WithRetries(0))
	if _, err := c.SegmentID(context.Background(), "fresh"); !errors.Is(err, CodeTagNotFound) {
		t.Fatalf("a tag not created here: %v", err)
	}
	c.OwnCreates().created("fresh")
	if id, err := c.SegmentID(context.Background(), "fresh"); err != nil || id != 9 {
		t.Errorf("%d %v after %d requests", id, err, lagging.hits.Load())
	}
}

func TestTLSFailuresMoveOnButGiveUpOnceEveryNodeFailed(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "3") }))
	t.Cleanup(srv.Close)
	// Without the CA: the platform's roots are never used, so the node is not trusted.
	c := fastClient(t, []string{srv.URL, srv.URL}, WithRetries(10))
	_, err := c.SegmentID(context.Background(), "t")
	var gave *GaveUpError
	var tlsErr *TLSError
	if !errors.As(err, &gave) || gave.Attempts != 2 || !errors.As(err, &tlsErr) || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("%v", err)
	}
	// With its CA as the only root, it is.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, block, 0o600); err != nil {
		t.Fatal(err)
	}
	if id, err := fastClient(t, []string{srv.URL}, WithCAFile(ca)).SegmentID(context.Background(), "t"); err != nil || id != 3 {
		t.Fatalf("with the CA: %v", err)
	}
	// https:// to a plaintext node.
	plain := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "1") })
	_, err = fastClient(t, []string{strings.Replace(plain.srv.URL, "http://", "https://", 1)}, WithCAFile(ca)).SegmentID(context.Background(), "t")
	if !errors.As(err, &tlsErr) || !strings.Contains(err.Error(), "did not answer in TLS") {
		t.Errorf("https to plaintext: %v", err)
	}
}

// /health's answers: a report whatever its status; a 503 error body is the error it carries;
// anything else is malformed. A decoded snowflake ID needs every field.
func TestHealthAndDecodeAnswersAreReadStrictly(t *testing.T) {
	report := `{"ready":false,"node_id":2,"term":7,"snowflake":{"state":"off"},"reason":"catching up"}`
	answers := map[string]func(w http.ResponseWriter){
		"/report503": func(w http.ResponseWriter) { w.WriteHeader(503); fmt.Fprint(w, report) },
		"/error503":  func(w http.ResponseWriter) { errorBody(w, 503, CodeShuttingDown) },
		"/partial":   func(w http.ResponseWriter) { fmt.Fprint(w, `{"ready":true}`) },
		"/decoded":   func(w http.ResponseWriter) { fmt.Fprint(w, `{"id":5,"timestamp_ms":1}`) },
	}
	var path atomic.Value
	f := newFakeNode(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		answers[path.Load().(string)](w)
	})
	c := fastClient(t, []string{f.srv.URL}, WithRetries(0))
	ctx := context.Background()

	path.Store("/report503")
	h, err := c.Health(ctx, HealthAll)
	if err != nil || h.Ready || h.NodeID != 2 || h.Term != 7 || h.Reason != "catching up" {
		t.Errorf("a 503 report: %+v %v", h, err)
	}
	path.Store("/error503")
	if h, err := c.Health(ctx, HealthAll); !errors.Is(err, CodeShuttingDown) {
		t.Errorf("a 503 error body read as a report: %+v %v", h, err)
	}
	path.Store("/partial")
	var dec *DecodeError
	if h, err := c.Health(ctx, HealthAll); !errors.As(err, &dec) {
		t.Errorf("a report without node_id, term and snowflake: %+v %v", h, err)
	}
	path.Store("/decoded")
	if d, err := c.Decode(ctx, 5); !errors.As(err, &dec) {
		t.Errorf("a decoded ID without its fields: %+v %v", d, err)
	}
}
