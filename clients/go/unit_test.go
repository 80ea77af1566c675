package leaf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestValidationRefusesWithTheServersCode(t *testing.T) {
	cases := []struct {
		err  error
		code ErrorCode
	}{
		{validTag("", "tag"), CodeInvalidTag},
		{validTag("no spaces", "tag"), CodeInvalidTag},
		{validTag(strings.Repeat("a", 129), "tag"), CodeInvalidTag},
		{validTag("ü", "tag"), CodeInvalidTag},
		{validCount(0, MaxBatch), CodeInvalidCount},
		{validCount(MaxBatch+1, MaxBatch), CodeInvalidCount},
		{validCount(MaxRangeBatch+1, MaxRangeBatch), CodeInvalidCount},
		{validKey(""), CodeInvalidRequest},
		{validKey("tab\there"), CodeInvalidRequest},
		{validKey(strings.Repeat("k", 129)), CodeInvalidRequest},
		{validReason("   "), CodeInvalidRequest},
		{validReason("bell\a"), CodeInvalidRequest},
		{validReason(strings.Repeat("r", 257)), CodeInvalidRequest},
		{validHold(-1), CodeInvalidRequest},
		{validHold(MaxHoldSeconds + 1), CodeInvalidRequest},
		{validCreate(CreateTagRequest{Tag: "t", Step: 0}), CodeInvalidRequest},
		{validCreate(CreateTagRequest{Tag: "t", Step: MaxStep + 1}), CodeInvalidRequest},
		{validCreate(CreateTagRequest{Tag: "bad tag", Step: 1}), CodeInvalidTag},
		{validCreate(CreateTagRequest{Tag: "t", Step: 1, Description: strings.Repeat("d", 1025)}), CodeInvalidRequest},
	}
	for i, c := range cases {
		var inv *InvalidArgumentError
		if !errors.As(c.err, &inv) || inv.Code != c.code || !errors.Is(c.err, c.code) {
			t.Errorf("case %d: %v, want %s", i, c.err, c.code)
		}
	}
	for _, ok := range []error{
		validTag("a", "tag"), validTag(strings.Repeat("Az09_.:-", 16), "tag"), validCount(1, MaxBatch),
		validCount(MaxBatch, MaxBatch), validKey(" ~"), validKey(strings.Repeat("k", 128)), validReason("ok"),
		validReason(strings.Repeat("é", 256)), validHold(0), validHold(MaxHoldSeconds),
		validCreate(CreateTagRequest{Tag: "t", Step: MaxStep}),
	} {
		if ok != nil {
			t.Errorf("refused: %v", ok)
		}
	}
	if got := (&InvalidArgumentError{Code: CodeInvalidCount, Message: "m"}).Error(); !strings.Contains(got, "HTTP 400") {
		t.Error(got)
	}
}

func TestCallsValidateBeforeSending(t *testing.T) {
	// A node that does not exist: a refused argument never reaches it (no transport error).
	c, err := New([]string{"http://127.0.0.1:1"}, WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	checks := []struct {
		name string
		err  error
		code ErrorCode
	}{}
	add := func(name string, err error, code ErrorCode) {
		checks = append(checks, struct {
			name string
			err  error
			code ErrorCode
		}{name, err, code})
	}
	_, err = c.SegmentID(ctx, "bad tag")
	add("SegmentID", err, CodeInvalidTag)
	_, err = c.SegmentIDs(ctx, "t", MaxBatch+1)
	add("SegmentIDs", err, CodeInvalidCount)
	_, err = c.SegmentRanges(ctx, "t", 0)
	add("SegmentRanges", err, CodeInvalidCount)
	_, err = c.SnowflakeID(ctx, "")
	add("SnowflakeID", err, CodeInvalidTag)
	_, err = c.SnowflakeIDs(ctx, "k", 0)
	add("SnowflakeIDs", err, CodeInvalidCount)
	_, err = c.SnowflakeRanges(ctx, "k", MaxRangeBatch+1)
	add("SnowflakeRanges", err, CodeInvalidCount)
	_, err = c.Decode(ctx, -1)
	add("Decode", err, CodeInvalidRequest)
	_, err = c.Health(ctx, "bogus")
	add("Health", err, CodeInvalidRequest)
	_, err = c.CreateTag(ctx, CreateTagRequest{Tag: "t", Step: 0})
	add("CreateTag", err, CodeInvalidRequest)
	_, err = c.CreateTag(ctx, CreateTagRequest{Tag: "t", Step: 1, Gapless: map[string]interface{}{"x": make(chan int)}})
	add("CreateTag body", err, CodeInvalidRequest)
	_, err = c.Tag(ctx, "a/b")
	add("Tag", err, CodeInvalidTag)
	_, err = c.ArchiveTag(ctx, "")
	add("ArchiveTag", err, CodeInvalidTag)
	_, err = c.RestoreTag(ctx, "a b")
	add("RestoreTag", err, CodeInvalidTag)
	_, err = c.IssueNumber(ctx, "inv", "")
	add("IssueNumber", err, CodeInvalidRequest)
	_, err = c.ReserveNumber(ctx, "inv", "k", MaxHoldSeconds+1)
	add("ReserveNumber", err, CodeInvalidRequest)
	_, err = c.ConfirmNumber(ctx, "in v", "k")
	add("ConfirmNumber", err, CodeInvalidTag)
	_, err = c.VoidNumber(ctx, "inv", "k", "")
	add("VoidNumber", err, CodeInvalidRequest)
	for _, ch := range checks {
		var inv *InvalidArgumentError
		if !errors.As(ch.err, &inv) || inv.Code != ch.code {
			t.Errorf("%s: %v, want a local %s", ch.name, ch.err, ch.code)
		}
	}
}

func TestNewChecksNodesTokenAndCA(t *testing.T) {
	good := map[string]string{
		"http://127.0.0.1:8080/": "http://127.0.0.1:8080", " http://leaf1:8080 ": "http://leaf1:8080",
		"https://leaf1:8443/": "https://leaf1:8443", "https://[::1]:8443": "https://[::1]:8443",
	}
	for in, want := range good {
		if got, err := parseBase(in); err != nil || got != want {
			t.Errorf("parseBase(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://x", "http://", "https://", "http://h:1/api", "https://h:1?x=1"} {
		if _, err := parseBase(bad); err == nil {
			t.Errorf("parseBase(%q) accepted", bad)
		}
	}
	if _, err := parseBase("http://admin:hunter2@leaf1:8080"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("credentials: %v", err)
	}
	if _, err := New(nil); err == nil {
		t.Error("no nodes accepted")
	}
	if _, err := New([]string{"http://h:1"}, WithToken("with space")); err == nil {
		t.Error("a token with a space accepted")
	}
	if _, err := New([]string{"https://h:1"}, WithCAFile("/no/such/ca.pem")); err == nil {
		t.Error("a missing CA file accepted")
	}
	for _, o := range []Option{WithTimeout(0), WithDeadline(-1), WithRetries(-1), WithBackoff(0, 1), WithBackoff(2, 1)} {
		if _, err := New([]string{"http://h:1"}, o); err == nil {
			t.Error("a bad option accepted")
		}
	}
	c, err := New([]string{"http://h:1"}, WithToken("s3cret-token"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, "s3cret") {
			t.Errorf("the token is shown: %s", s)
		}
	}
	if c.timeout != 5*time.Second || c.deadline != 15*time.Second || c.retries != 3 || c.backoff != DefaultBackoff {
		t.Errorf("defaults differ from the Rust client's: %v", c)
	}
}

func TestWhatIsRetried(t *testing.T) {
	refused := &TransportError{Node: "n", Message: "refused", Connect: true}
	reset := &TransportError{Node: "n", Message: "reset"}
	timeout := &TimeoutError{Node: "n", Timeout: time.Second}
	tlsErr := &TLSError{Node: "n", Message: "untrusted"}
	for _, s := range []safety{idempotent, atMostOnce} {
		if !retryable(refused, s) || !retryable(tlsErr, s) {
			t.Error("a request never sent is always retried")
		}
	}
	if !retryable(reset, idempotent) || !retryable(timeout, idempotent) {
		t.Error("no answer is retried when idempotent")
	}
	if retryable(reset, atMostOnce) || retryable(timeout, atMostOnce) {
		t.Error("no answer after sending is not retried at most once")
	}
	for code := range transientCodes {
		e := &APIError{Status: 503, Code: code}
		if !retryable(e, idempotent) || retryable(e, atMostOnce) {
			t.Errorf("%s", code)
		}
	}
	for _, e := range []*APIError{
		{Status: 503, Code: CodeWorkerIDsExhausted}, {Status: 400, Code: CodeInvalidCount},
		{Status: 404, Code: CodeTagNotFound}, {Status: 409, Code: CodeTagExists}, {Status: 429, Code: CodeRateLimited},
		{Status: 401, Code: CodeUnauthorized}, {Status: 500, Code: CodeUnavailable},
	} {
		if retryable(e, idempotent) {
			t.Errorf("%d %s retried", e.Status, e.Code)
		}
	}
	if !retryable(&DecodeError{Status: 503}, idempotent) || retryable(&DecodeError{Status: 200}, idempotent) {
		t.Error("a 503 without an error body is retried, a bad 200 is not")
	}
	if retryable(&InvalidArgumentError{Code: CodeInvalidTag}, idempotent) || retryable(errors.New("x"), idempotent) {
		t.Error("other errors are not retried")
	}
	if !givesUpOnTLS(tlsErr, 1, 1) || givesUpOnTLS(tlsErr, 3, 2) || !givesUpOnTLS(tlsErr, 3, 3) || givesUpOnTLS(refused, 1, 5) {
		t.Error("a TLS failure moves on but never comes back round")
	}
}

func TestBackoffGrowsToItsCapWithJitter(t *testing.T) {
	b := Backoff{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}
	within := func(d, lo, hi time.Duration) bool { return d >= lo && d <= hi }
	for i := 0; i < 1000; i++ {
		if d := b.Delay(0); !within(d, 5*time.Millisecond, 10*time.Millisecond) {
			t.Fatalf("retry 0: %v", d)
		}
		if d := b.Delay(2); !within(d, 20*time.Millisecond, 40*time.Millisecond) {
			t.Fatalf("retry 2: %v", d)
		}
		if d := b.Delay(40); !within(d, 50*time.Millisecond, 100*time.Millisecond) {
			t.Fatalf("retry 40: %v", d)
		}
	}
	if DefaultBackoff.Full(0) != 50*time.Millisecond || DefaultBackoff.Full(10) != time.Second {
		t.Error("the default backoff is 50 ms doubling to 1 s")
	}
	if leaseBackoff(1, 50*time.Millisecond, time.Second) != 50*time.Millisecond ||
		leaseBackoff(3, 50*time.Millisecond, time.Second) != 200*time.Millisecond ||
		leaseBackoff(1<<30, 50*time.Millisecond, time.Second) != time.Second {
		t.Error("lease backoff")
	}
}

func TestErrorDecoding(t *testing.T) {
	r := &raw{status: 404, body: []byte(`{"code":"tag_not_found","message":"no tag x","leaf_code":-2}`)}
	err := errorOf("http://n:1", r)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 404 || api.Code != CodeTagNotFound || api.LeafCode == nil || *api.LeafCode != -2 || api.Node != "http://n:1" {
		t.Fatalf("%#v", err)
	}
	if !errors.Is(err, CodeTagNotFound) || errors.Is(err, CodeTagExists) {
		t.Error("errors.Is by code")
	}
	wrapped := &GaveUpError{Attempts: 3, Last: err}
	if code, ok := CodeOf(wrapped); !ok || code != CodeTagNotFound || !errors.Is(wrapped, CodeTagNotFound) {
		t.Error("a GaveUpError looks through to its last error")
	}
	future := errorOf("n", &raw{status: 418, body: []byte(`{"code":"from_the_future","message":"m","leaf_code":null}`)})
	if !errors.As(future, &api) || api.Code.Known() || api.Code != "from_the_future" {
		t.Errorf("unknown code: %v", future)
	}
	ra := errorOf("n", &raw{status: 503, retryAfter: retryAfter("1"), body: []byte(`{"code":"unavailable","message":"m","leaf_code":null}`)})
	if !errors.As(ra, &api) || api.RetryAfter != time.Second || !IsUnavailable(ra) {
		t.Errorf("retry-after: %v", ra)
	}
	var dec *DecodeError
	for _, body := range []string{"<html>proxy</html>", `{"code":1,"message":"m"}`, `{"message":"m"}`, ""} {
		if e := errorOf("n", &raw{status: 502, body: []byte(body)}); !errors.As(e, &dec) || dec.Status != 502 {
			t.Errorf("%q: %v", body, e)
		}
	}
	if !IsUnavailable(&TimeoutError{}) || !IsUnavailable(&TransportError{}) || IsUnavailable(&TLSError{}) ||
		IsUnavailable(&APIError{Status: 404}) {
		t.Error("IsUnavailable")
	}
	ctxErr := &GaveUpError{Attempts: 1, Cause: context.Canceled}
	if !errors.Is(ctxErr, context.Canceled) || errors.Is(ctxErr, context.DeadlineExceeded) {
		t.Error("a GaveUpError is its context's error")
	}
	if retryAfter("soon") != 0 || retryAfter("-1") != 0 {
		t.Error("retryAfter")
	}
}

func TestAnswersAreChecked(t *testing.T) {
	a := func(body string) *answer { return &answer{node: "n", status: 200, body: []byte(body)} }
	if id, err := oneID(a("42\n")); err != nil || id != 42 {
		t.Error(id, err)
	}
	for _, bad := range []string{"", "-1", "x", "1 2", "99999999999999999999", "+5"} {
		if _, err := oneID(a(bad)); err == nil {
			t.Errorf("oneID(%q) accepted", bad)
		}
	}
	if got, err := ids(a("1\n2\n3\n"), 3); err != nil || len(got) != 3 || got[2] != 3 {
		t.Error(got, err)
	}
	for _, bad := range []string{"1\n2\n", "1\n2\n3\n4\n", "1\n\n3\n", "1\nx\n3\n", ""} {
		if _, err := ids(a(bad), 3); err == nil {
			t.Errorf("ids(%q, 3) accepted", bad)
		}
	}
	if r, err := ranges(a(`{"ranges":[{"start":1,"end":5},{"start":10,"end":16}]}`), 10); err != nil || r.Len() != 10 || len(r.IDs()) != 10 {
		t.Error(r, err)
	}
	for _, bad := range []string{
		`{"ranges":[{"start":1,"end":5}]}`, `{"ranges":[{"start":5,"end":5},{"start":6,"end":16}]}`,
		`{"ranges":[{"start":10,"end":15},{"start":1,"end":6}]}`, `{"ranges":[{"start":-5,"end":5}]}`,
		`{"ranges":[{"start":0,"end":9223372036854775807},{"start":9223372036854775806,"end":9223372036854775807}]}`,
		`not json`, `{"ranges":[{"start":"1","end":11}]}`,
		`{"ranges":[{"end":10}]}`, `{"ranges":[{"start":0}]}`, `{"ranges":[{"start":0,"end":4},{"end":6}]}`,
	} {
		var dec *DecodeError
		if _, err := ranges(a(bad), 10); !errors.As(err, &dec) {
			t.Errorf("ranges(%s) = %v", bad, err)
		}
	}
}
