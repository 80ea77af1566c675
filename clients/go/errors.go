package leaf

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// No error of this package carries the client's token or a URL's credentials: error text is
// safe to log.

// APIError is a node's error answer: `{"code", "message", "leaf_code"}` with a non-2xx status.
type APIError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Code is the API's stable code, as sent (it may be one this client does not know:
	// Code.Known()).
	Code ErrorCode
	// Message is the node's explanation.
	Message string
	// LeafCode is Leaf's numeric result code (e.g. -2 for an unknown tag), when given.
	LeafCode *int64
	// RetryAfter is the wait a 429 or 503 asked for (Retry-After), 0 when none.
	RetryAfter time.Duration
	// Node is the base URL of the node that answered.
	Node string
}

// Error describes the failure (never with the token).
func (e *APIError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s: %s", e.Node, e.Status, e.Code, e.Message)
}

// Is makes errors.Is(err, leaf.CodeXxx) true for an answer with that code.
func (e *APIError) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

// InvalidArgumentError is an argument refused before anything was sent, with the code (and
// status) the server would have answered.
type InvalidArgumentError struct {
	// Code is invalid_tag, invalid_count or invalid_request.
	Code ErrorCode
	// Message says which argument and what is allowed.
	Message string
}

// Error describes the failure (never with the token).
func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("(checked locally) HTTP %d: %s: %s", e.Code.Status(), e.Code, e.Message)
}

// Is makes errors.Is(err, leaf.CodeXxx) true for a refusal with that code.
func (e *InvalidArgumentError) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

func invalid(code ErrorCode, format string, args ...interface{}) error {
	return &InvalidArgumentError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// TransportError is no answer: the connection refused, reset or closed. Connect is true when
// the request was never sent (the connection could not be opened).
type TransportError struct {
	Node    string
	Message string
	Connect bool
	Err     error
}

// Error describes the failure (never with the token).
func (e *TransportError) Error() string { return fmt.Sprintf("%s: %s", e.Node, e.Message) }

// Unwrap returns the underlying network error.
func (e *TransportError) Unwrap() error { return e.Err }

// TimeoutError is no complete answer within the per-attempt timeout (or what was left of the
// call's deadline).
type TimeoutError struct {
	Node    string
	Timeout time.Duration
}

// Error describes the failure (never with the token).
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: no answer within %v", e.Node, e.Timeout)
}

// TLSError is a failed TLS handshake (a certificate this client does not trust, one for
// another host or out of date, a plaintext port): a setup problem, not an outage. The node
// processed no request.
type TLSError struct {
	Node    string
	Message string
	Err     error
}

// Error describes the failure (never with the token).
func (e *TLSError) Error() string {
	return fmt.Sprintf("%s: TLS handshake failed: %s", e.Node, e.Message)
}

// Unwrap returns the underlying TLS or x509 error.
func (e *TLSError) Unwrap() error { return e.Err }

// DecodeError is an answer that is not what the endpoint returns (not JSON, the wrong number
// of IDs, malformed ranges, too large), or an error status without an error body (a proxy's
// page). A 503 of this kind is retried like an unavailable node.
type DecodeError struct {
	Node    string
	Status  int
	Message string
}

// Error describes the failure (never with the token).
func (e *DecodeError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: unexpected answer: %s", e.Node, e.Status, e.Message)
}

// GaveUpError is a call that failed on every attempt it was allowed: the retry budget or the
// deadline ran out (or the caller's context ended) after errors worth retrying. Last is the
// final attempt's error (errors.Is and errors.As look through to it); Cause is the context's
// error when the caller's context ended the call.
type GaveUpError struct {
	Attempts int
	Last     error
	Cause    error
}

// Error describes the failure (never with the token).
func (e *GaveUpError) Error() string {
	if e.Cause != nil {
		if e.Last == nil {
			return fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, e.Cause)
		}
		return fmt.Sprintf("gave up after %d attempts (%v): %v", e.Attempts, e.Cause, e.Last)
	}
	return fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, e.Last)
}

// Unwrap returns the last attempt's error.
func (e *GaveUpError) Unwrap() error { return e.Last }

// Is makes errors.Is(err, context.Canceled / context.DeadlineExceeded) true when the
// caller's context ended the call.
func (e *GaveUpError) Is(target error) bool {
	return e.Cause != nil && (target == e.Cause || errors.Is(e.Cause, target))
}

// ConfigError is a client or pool that cannot be built: no nodes, a bad URL, a bad token, an
// unreadable CA file, inconsistent options. It never echoes a token or URL credentials.
type ConfigError struct{ Message string }

// Error describes the failure (never with the token).
func (e *ConfigError) Error() string { return "leaf: " + e.Message }

// CodeOf returns the API error code of err (an *APIError or *InvalidArgumentError, looking
// through wrapping), and whether it has one.
func CodeOf(err error) (ErrorCode, bool) {
	var a *APIError
	if errors.As(err, &a) {
		return a.Code, true
	}
	var i *InvalidArgumentError
	if errors.As(err, &i) {
		return i.Code, true
	}
	return "", false
}

// IsUnavailable reports whether err means the service could not answer now (a 503, no
// answer, a timeout) rather than the request being wrong: worth trying again later.
func IsUnavailable(err error) bool {
	var a *APIError
	var d *DecodeError
	var t *TransportError
	var to *TimeoutError
	switch {
	case errors.As(err, &a):
		return a.Status == 503
	case errors.As(err, &d):
		return d.Status == 503
	case errors.As(err, &t), errors.As(err, &to):
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}
