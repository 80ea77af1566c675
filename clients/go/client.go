package leaf

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Client is a client of one leaf cluster (any of its nodes) over HTTP(S); safe for concurrent
// use, one connection pool. A call starts at the node that answered last and moves on to the
// next one after an error worth retrying (see retry.go), backing off between attempts, at most
// Retries times after the first attempt, within the deadline, each attempt within the timeout.
// Every call honours its context's deadline and cancellation.
type Client struct {
	nodes         []string
	auth          string
	timeout       time.Duration
	deadline      time.Duration
	retries       int
	backoff       Backoff
	caFile        string
	http          *http.Client
	preferred     atomic.Int64
	own           *OwnCreates
	settlementKey [32]byte
}

// config is what the options set.
type config struct {
	token         *string
	caFile        string
	timeout       time.Duration
	deadline      time.Duration
	retries       int
	backoff       Backoff
	own           *OwnCreates
	settlementKey *[32]byte
}

// Option configures a Client (New).
type Option func(*config) error

// WithToken sends token as `Authorization: Bearer <token>` on every request. It never appears
// in a String() or an error.
func WithToken(token string) Option {
	return func(c *config) error {
		for i := 0; i < len(token); i++ {
			if token[i] < 0x21 || token[i] > 0x7e {
				return &ConfigError{Message: "the token must be printable ASCII without spaces"}
			}
		}
		if token == "" {
			return &ConfigError{Message: "the token is empty"}
		}
		c.token = &token
		return nil
	}
}

// WithCAFile trusts only the CA certificate(s) in this PEM file for https:// nodes. Without
// it no https:// node is trusted (the platform's roots are never used).
func WithCAFile(path string) Option {
	return func(c *config) error { c.caFile = path; return nil }
}

// WithTimeout sets the longest wait for one attempt's complete answer (default 5 s).
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return &ConfigError{Message: "the timeout must be above zero"}
		}
		c.timeout = d
		return nil
	}
}

// WithDeadline sets the longest time one call may take over all its attempts and backoffs
// (default 15 s). A context's earlier deadline wins.
func WithDeadline(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return &ConfigError{Message: "the deadline must be above zero"}
		}
		c.deadline = d
		return nil
	}
}

// WithRetries sets the attempts after the first, on errors worth retrying (default 3; 0: one
// attempt only).
func WithRetries(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return &ConfigError{Message: "retries must not be negative"}
		}
		c.retries = n
		return nil
	}
}

// WithBackoff sets the backoff before retry n: a random time between half and all of
// min(cap, base·2ⁿ) (default 50 ms, 1 s).
func WithBackoff(base, cap time.Duration) Option {
	return func(c *config) error {
		if base <= 0 || cap < base {
			return &ConfigError{Message: "the backoff needs 0 < base <= cap"}
		}
		c.backoff = Backoff{Base: base, Cap: cap}
		return nil
	}
}

// WithSettlementKey sets the key this client derives its gapless settlement secrets from when
// it has no token (see gapless.go): a client built again with the same key repeats, confirms
// and voids the numbers an earlier one took. Keep it like a password. Default: a random key per
// client.
func WithSettlementKey(key [32]byte) Option {
	return func(c *config) error { c.settlementKey = &key; return nil }
}

// WithOwnCreates shares a memory of recent creates with other clients (see OwnCreates).
func WithOwnCreates(o *OwnCreates) Option {
	return func(c *config) error {
		if o == nil {
			return &ConfigError{Message: "WithOwnCreates(nil)"}
		}
		c.own = o
		return nil
	}
}

// New builds a client of the nodes at nodes (`http://host:port` or `https://host:port` each).
// It checks the URLs and the options and reads the CA file, without touching the network.
func New(nodes []string, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, &ConfigError{Message: "no node URLs given"}
	}
	cfg := config{timeout: 5 * time.Second, deadline: 15 * time.Second, retries: 3, backoff: DefaultBackoff}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	bases := make([]string, len(nodes))
	for i, n := range nodes {
		b, err := parseBase(n)
		if err != nil {
			return nil, err
		}
		bases[i] = b
	}
	roots, err := loadCA(cfg.caFile)
	if err != nil {
		return nil, err
	}
	c := &Client{
		nodes:    bases,
		timeout:  cfg.timeout,
		deadline: cfg.deadline,
		retries:  cfg.retries,
		backoff:  cfg.backoff,
		caFile:   cfg.caFile,
		http:     newHTTPClient(roots),
		own:      cfg.own,
	}
	if cfg.token != nil {
		c.auth = "Bearer " + *cfg.token
	}
	if c.own == nil {
		c.own = NewOwnCreates()
	}
	if cfg.settlementKey != nil {
		c.settlementKey = *cfg.settlementKey
	} else if _, err := rand.Read(c.settlementKey[:]); err != nil {
		return nil, &ConfigError{Message: "no randomness for the settlement key: " + err.Error()}
	}
	return c, nil
}

// parseBase turns `http://host:port[/]` into `http://host:port` (and the same for https://):
// no path, query or credentials.
func parseBase(raw string) (string, error) {
	text := strings.TrimRight(strings.TrimSpace(raw), "/")
	if strings.Contains(text, "@") {
		return "", &ConfigError{Message: "invalid node URL (redacted): credentials in the URL are not supported"}
	}
	bad := func(why string) error {
		return &ConfigError{Message: fmt.Sprintf("invalid node URL %q: %s", raw, why)}
	}
	u, err := url.Parse(text)
	if err != nil {
		return "", bad("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", bad("expected http://host:port or https://host:port")
	}
	if u.Hostname() == "" {
		return "", bad("no host")
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", bad("a node URL has no path or query")
	}
	return u.Scheme + "://" + u.Host, nil
}

// Nodes returns the nodes' base URLs, as normalised by New.
func (c *Client) Nodes() []string { return append([]string(nil), c.nodes...) }

// OwnCreates returns this client's memory of the tags it created, to share with another
// client (WithOwnCreates).
func (c *Client) OwnCreates() *OwnCreates { return c.own }

// Preferred returns the index in Nodes() of the node the next call starts at: the one that
// answered last.
func (c *Client) Preferred() int { return int(c.preferred.Load()) }

// String describes the client without its token.
func (c *Client) String() string {
	token := "none"
	if c.auth != "" {
		token = "(set)"
	}
	return fmt.Sprintf("leaf.Client{nodes: %v, token: %s, ca: %q, timeout: %v, deadline: %v, retries: %d, backoff: %v..%v}",
		c.nodes, token, c.caFile, c.timeout, c.deadline, c.retries, c.backoff.Base, c.backoff.Cap)
}

// GoString is String (so %#v does not print the token either).
func (c *Client) GoString() string { return c.String() }

// Close closes the idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// execute runs c over the nodes: starts at the node that last answered, moves to the next one
// after an error worth retrying, backing off between attempts, within the retry budget, the
// deadline and ctx.
func (cl *Client) execute(ctx context.Context, c *call) (*answer, error) {
	deadline := time.Now().Add(cl.deadline)
	n := len(cl.nodes)
	first := int(cl.preferred.Load()) % n
	tlsFailures := 0
	var last error
	giveUp := func(attempt int, err error) error {
		if attempt == 0 {
			return err
		}
		return &GaveUpError{Attempts: attempt + 1, Last: err}
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, &GaveUpError{Attempts: attempt, Last: last, Cause: err}
		}
		idx := (first + attempt) % n
		node := cl.nodes[idx]
		timeout := time.Until(deadline)
		if timeout > cl.timeout {
			timeout = cl.timeout
		}
		if timeout <= 0 {
			if last == nil {
				return nil, &TimeoutError{Node: node, Timeout: 0}
			}
			return nil, giveUp(attempt-1, last)
		}
		r, err := cl.send(ctx, node, c, timeout)
		if err == nil {
			var a *answer
			if a, err = check(node, r, c.alsoOK); err == nil {
				cl.preferred.Store(int64(idx))
				return a, nil
			}
		}
		if ctx.Err() != nil {
			if errors.Is(err, ctx.Err()) {
				err = last
			}
			return nil, &GaveUpError{Attempts: attempt + 1, Last: err, Cause: ctx.Err()}
		}
		last = err
		ownCreate := c.tag != "" && isTagNotFound(err) && cl.own.WithinGrace(c.tag)
		if !ownCreate && !retryable(err, c.safety) {
			return nil, err
		}
		if _, ok := err.(*TLSError); ok {
			tlsFailures++
		}
		if (!ownCreate && attempt >= cl.retries) || givesUpOnTLS(err, n, tlsFailures) {
			return nil, giveUp(attempt, err)
		}
		wait := cl.backoff.Delay(attempt)
		if ownCreate {
			wait = ownCreatesRetryEvery
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, giveUp(attempt, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, &GaveUpError{Attempts: attempt + 1, Last: err, Cause: ctx.Err()}
		}
	}
}

func isTagNotFound(err error) bool {
	a, ok := err.(*APIError)
	return ok && a.Code == CodeTagNotFound
}

// check returns a 2xx (or alsoOK) answer, or the error its body describes.
func check(node string, r *raw, alsoOK int) (*answer, error) {
	if (r.status >= 200 && r.status < 300) || (alsoOK != 0 && r.status == alsoOK) {
		return &answer{node: node, status: r.status, body: r.body}, nil
	}
	return nil, errorOf(node, r)
}

// errorOf is the typed error of a non-2xx answer: an *APIError when the body is an error
// body, else a *DecodeError.
func errorOf(node string, r *raw) error {
	var body struct {
		Code     *string `json:"code"`
		Message  *string `json:"message"`
		LeafCode *int64  `json:"leaf_code"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Code == nil || body.Message == nil {
		snippet := r.body
		if len(snippet) > 200 {
			snippet = snippet[:200]
		}
		return &DecodeError{Node: node, Status: r.status, Message: fmt.Sprintf("not an error body: %q", snippet)}
	}
	return &APIError{
		Status:     r.status,
		Code:       ErrorCode(*body.Code),
		Message:    *body.Message,
		LeafCode:   body.LeafCode,
		RetryAfter: r.retryAfter,
		Node:       node,
	}
}

// jsonBody marshals v for a request body (a value that does not marshal, such as a channel
// in CreateTagRequest.Gapless, is an invalid_request refused locally).
func jsonBody(v interface{}) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, invalid(CodeInvalidRequest, "the request body does not encode as JSON: %v", err)
	}
	return b, nil
}

// decodeJSON decodes an answer's body into v, as a *DecodeError when it does not fit.
func decodeJSON(a *answer, v interface{}) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return a.decodeError("not the expected JSON: %v", err)
	}
	return nil
}
