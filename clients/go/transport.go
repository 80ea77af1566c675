package leaf

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// MaxAnswerBytes is the largest answer read (a batch of 100,000 IDs is about 2 MB).
const MaxAnswerBytes = 16 << 20

// userAgent is sent with every request.
const userAgent = "leaf-client-go/0.1.0"

// call is one request before it is sent.
type call struct {
	method string
	// path is the path and query.
	path   string
	body   []byte
	safety safety
	// alsoOK is a non-2xx status whose body is the answer (/health answers 503 with its
	// report); 0 for none.
	alsoOK int
	// tag is the tag the call takes IDs of or looks at: a tag_not_found for a tag this
	// client just created is retried (see OwnCreates).
	tag string
}

// raw is an answer of any status.
type raw struct {
	status     int
	retryAfter time.Duration
	body       []byte
}

// answer is a successful answer and the node that gave it.
type answer struct {
	node   string
	status int
	body   []byte
}

func (a *answer) decodeError(format string, args ...interface{}) error {
	return &DecodeError{Node: a.node, Status: a.status, Message: fmt.Sprintf(format, args...)}
}

// newHTTPClient is the connection pool of a client: plain TCP for http://, TLS trusting only
// roots for https:// (an empty pool when no CA was given: every handshake then fails as
// untrusted; the platform's roots are never used). Environment proxies are not used.
func newHTTPClient(roots *x509.CertPool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	// A redirect is not followed: it is an answer without an error body (a *DecodeError).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &http.Client{Transport: t, CheckRedirect: noRedirect}
}

// loadCA reads the cluster CA (PEM) as the only trust root.
func loadCA(path string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if path == "" {
		return pool, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{Message: fmt.Sprintf("cannot read the CA file %s: %v", path, err)}
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &ConfigError{Message: fmt.Sprintf("the CA file %s holds no PEM certificate", path)}
	}
	return pool, nil
}

// send makes one attempt of c at node within timeout and reads the whole (bounded) answer.
// When ctx itself ends, the error is ctx.Err().
func (cl *Client) send(ctx context.Context, node string, c *call, timeout time.Duration) (*raw, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(actx, c.method, node+c.path, body)
	if err != nil {
		return nil, &TransportError{Node: node, Message: "cannot build the request: " + err.Error(), Connect: true, Err: err}
	}
	req.Header.Set("User-Agent", userAgent)
	if cl.auth != "" {
		req.Header.Set("Authorization", cl.auth)
	}
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return nil, classify(ctx, actx, node, err, timeout)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, classify(ctx, actx, node, err, timeout)
	}
	if len(data) > MaxAnswerBytes {
		return nil, &DecodeError{Node: node, Status: resp.StatusCode, Message: fmt.Sprintf("more than %d bytes", MaxAnswerBytes)}
	}
	return &raw{status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After")), body: data}, nil
}

// retryAfter parses a Retry-After of whole seconds (0 when absent or not seconds).
func retryAfter(v string) time.Duration {
	s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || s < 0 || s > 86400 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// classify turns the failure of one attempt into this package's error: the caller's context
// ending, a TLS failure, a timeout, or no answer (connect: the request was never sent).
func classify(ctx, actx context.Context, node string, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if msg, ok := describeTLS(err); ok {
		return &TLSError{Node: node, Message: msg, Err: err}
	}
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	if actx.Err() != nil || isTimeout(err) {
		if dial {
			return &TransportError{Node: node, Message: fmt.Sprintf("cannot connect within %v", timeout), Connect: true, Err: err}
		}
		return &TimeoutError{Node: node, Timeout: timeout}
	}
	msg := err.Error()
	if strings.HasPrefix(node, "http://") && strings.Contains(msg, "malformed HTTP response") {
		msg += " (the answer is not HTTP: if the node serves TLS, use https://)"
	}
	return &TransportError{Node: node, Message: msg, Connect: dial, Err: err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// describeTLS says, in plain words, what a TLS handshake failure is; false when err is not one.
func describeTLS(err error) (string, bool) {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return "the node's certificate is not trusted (" + unknown.Error() + "): pass the cluster's CA file (WithCAFile)", true
	case errors.As(err, &host):
		return "the node's certificate does not name this host (" + host.Error() + ")", true
	case errors.As(err, &invalidCert):
		return "the node's certificate is not valid (" + invalidCert.Error() + ")", true
	case errors.As(err, &record):
		return "the node did not answer in TLS: use http:// for a plaintext node", true
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "the node did not answer in TLS: use http:// for a plaintext node", true
	}
	// Alerts and handshake failures (a client certificate demanded, no common version...).
	if msg := err.Error(); strings.Contains(msg, "tls: ") &&
		(strings.Contains(msg, "handshake") || strings.Contains(msg, "certificate")) {
		return msg, true
	}
	return "", false
}
