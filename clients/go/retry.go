package leaf

import (
	"math/rand"
	"sync"
	"time"
)

// When a failed attempt may be repeated (on the same or the next node), and how long to wait
// first: the rules of the Rust client's client/src/retry.rs.
//
// Each call declares its safety:
//   - idempotent: repeating it cannot change what the caller ends up with. Reads; ID requests
//     (an ID range handed to an answer that was lost is never handed out again: a retry makes a
//     gap, never a duplicate); archives and restores; gapless issue, reserve, confirm and
//     void (the key keeps a repeat to its number).
//   - at most once: creating a tag. If a first attempt committed but its answer was lost, a
//     retry would answer tag_exists; so it is retried only when the connection could not be
//     opened (the request never left this process).
//
// A TLS handshake failure means the node processed nothing, so another node may be tried
// whatever the safety; waiting does not cure it, so a call gives up once every node failed so.
//
// Errors worth retrying: no answer (transport error, timeout) and a 503 whose code says the
// node or the cluster is temporarily unable (transientCodes), or a 503 without a readable
// error body. Everything else (400s, 401, 403, 404, 409, 429, worker_ids_exhausted) is the
// answer, returned at once.

// safety says whether a call may be repeated after it may have reached a node.
type safety int

const (
	idempotent safety = iota
	atMostOnce
)

// transientCodes are the 503 codes another node, or the same node a little later, may not
// answer.
var transientCodes = map[ErrorCode]bool{
	CodeUnavailable:          true,
	CodeNotReady:             true,
	CodeSegmentsNotReady:     true,
	CodeShuttingDown:         true,
	CodeSnowflakeUnavailable: true,
	CodeClockMovedBackwards:  true,
}

// retryable reports whether err, from one attempt of a call with safety s, may be retried.
func retryable(err error, s safety) bool {
	switch e := err.(type) {
	case *TLSError:
		return true
	case *TransportError:
		return e.Connect || s == idempotent
	case *TimeoutError:
		return s == idempotent
	case *APIError:
		return s == idempotent && e.Status == 503 && transientCodes[e.Code]
	case *DecodeError:
		return s == idempotent && e.Status == 503
	}
	return false
}

// givesUpOnTLS reports whether a call over nodes nodes stops after err when tlsFailures of
// its attempts (this one included) failed in the TLS handshake: every node had its turn.
func givesUpOnTLS(err error, nodes, tlsFailures int) bool {
	_, ok := err.(*TLSError)
	return ok && tlsFailures >= nodes
}

// Backoff is a capped exponential backoff with jitter: before retry n (0-based) a call waits a
// random time between half and all of min(Cap, Base·2ⁿ). The default is 50 ms to 1 s.
type Backoff struct {
	Base time.Duration
	Cap  time.Duration
}

// DefaultBackoff is the Rust client's default: 50 ms doubling to at most 1 s.
var DefaultBackoff = Backoff{Base: 50 * time.Millisecond, Cap: time.Second}

// Full is min(Cap, Base·2ⁿ): the longest wait before retry n.
func (b Backoff) Full(retry int) time.Duration {
	if retry > 20 {
		retry = 20
	}
	if retry < 0 {
		retry = 0
	}
	full := b.Base << uint(retry)
	if full > b.Cap || full < b.Base {
		full = b.Cap
	}
	return full
}

// Delay is the wait before retry n (0-based): a random time in [Full(n)/2, Full(n)].
func (b Backoff) Delay(retry int) time.Duration {
	full := b.Full(retry)
	half := full / 2
	return half + time.Duration(jitter(int64(full-half)+1))
}

var (
	jitterMu  sync.Mutex
	jitterRnd = rand.New(rand.NewSource(time.Now().UnixNano()))
)

// jitter is a random number in [0, n).
func jitter(n int64) int64 {
	if n <= 0 {
		return 0
	}
	jitterMu.Lock()
	defer jitterMu.Unlock()
	return jitterRnd.Int63n(n)
}
