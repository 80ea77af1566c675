package leaf

import (
	"encoding/json"
	"fmt"
	"math"
)

// IDRange is the IDs Start, Start+1, ..., End-1 (End exclusive).
type IDRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Len is the number of IDs in the range.
func (r IDRange) Len() int64 { return r.End - r.Start }

// IDRanges is a batch of IDs as ascending, non-overlapping, non-empty ranges, in the order the
// node handed them out.
type IDRanges struct {
	Ranges []IDRange `json:"ranges"`
}

// Len is the number of IDs in all the ranges.
func (r IDRanges) Len() int64 {
	var n int64
	for _, x := range r.Ranges {
		n += x.Len()
	}
	return n
}

// IDs lists every ID of the ranges, in order.
func (r IDRanges) IDs() []int64 {
	out := make([]int64, 0, r.Len())
	for _, x := range r.Ranges {
		for id := x.Start; id < x.End; id++ {
			out = append(out, id)
		}
	}
	return out
}

// Check says what is wrong with these ranges as an answer for count IDs (nil: nothing): each
// non-empty and non-negative, ascending, not overlapping, count IDs in all.
func (r IDRanges) Check(count int64) error {
	var total int64
	prevEnd := int64(-1)
	for _, x := range r.Ranges {
		if x.Start < 0 || x.End <= x.Start {
			return fmt.Errorf("a malformed range [%d, %d)", x.Start, x.End)
		}
		if x.Start < prevEnd {
			return fmt.Errorf("range [%d, %d) overlaps or precedes the one before it", x.Start, x.End)
		}
		prevEnd = x.End
		if total > math.MaxInt64-x.Len() {
			return fmt.Errorf("more IDs in the ranges than asked for (%d)", count)
		}
		total += x.Len()
	}
	if total != count {
		return fmt.Errorf("%d IDs in the ranges, asked for %d", total, count)
	}
	return nil
}

// SnowflakeID is a decoded snowflake ID: its logical time, the worker that made it and its
// sequence, as the server decodes it (the epoch is the server's).
type SnowflakeID struct {
	ID          int64  `json:"id"`
	TimestampMs int64  `json:"timestamp_ms"`
	Timestamp   string `json:"timestamp"`
	WorkerID    int64  `json:"worker_id"`
	Sequence    int64  `json:"sequence"`
}

// HealthMode selects the readiness /health reports in its status.
type HealthMode string

// The modes of /health.
const (
	// HealthAll is both segment and snowflake readiness (the server's default).
	HealthAll       HealthMode = ""
	HealthSegment   HealthMode = "segment"
	HealthSnowflake HealthMode = "snowflake"
)

// Health is a node's /health report (a node that is not ready answers it too, with a 503).
type Health struct {
	Ready          bool   `json:"ready"`
	SegmentReady   *bool  `json:"segment_ready,omitempty"`
	NodeID         int64  `json:"node_id"`
	LeaderID       *int64 `json:"leader_id,omitempty"`
	Term           int64  `json:"term"`
	LastApplied    *int64 `json:"last_applied_index,omitempty"`
	QuorumAckAgeMs *int64 `json:"quorum_ack_age_ms,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Snowflake is the snowflake section as answered (state, worker ID, ...).
	Snowflake map[string]interface{} `json:"snowflake"`
}

// TagInfo is a tag as stored (GET /admin/tags/{tag}). MaxID is the next unallocated ID; Raw
// holds every field answered (profile options, ...).
type TagInfo struct {
	Tag         string                     `json:"tag"`
	MaxID       int64                      `json:"max_id"`
	Step        int64                      `json:"step"`
	Description string                     `json:"description"`
	CreatedMs   int64                      `json:"created_ms"`
	UpdatedMs   int64                      `json:"updated_ms"`
	Profile     string                     `json:"profile,omitempty"`
	UpperBound  *int64                     `json:"upper_bound,omitempty"`
	ArchivedMs  *int64                     `json:"archived_ms,omitempty"`
	Raw         map[string]json.RawMessage `json:"-"`
}

// CreateTagRequest is the body of POST /admin/tags. Zero-valued optional fields are left out.
type CreateTagRequest struct {
	Tag  string `json:"tag"`
	Step int64  `json:"step"`
	// MaxID is the first ID handed out (the server's 1 when nil).
	MaxID       *int64 `json:"max_id,omitempty"`
	Description string `json:"description,omitempty"`
	// Profile is segment (default), monotonic, obfuscated, daily or gapless.
	Profile string `json:"profile,omitempty"`
	// Gapless holds a gapless tag's options, e.g. {"reset": "year", "format": "INV-{yyyy}-{seq:06}"}.
	Gapless map[string]interface{} `json:"gapless,omitempty"`
	// Daily holds a daily tag's options, e.g. {"digits": 8}.
	Daily      map[string]interface{} `json:"daily,omitempty"`
	UpperBound *int64                 `json:"upper_bound,omitempty"`
}

// NumberState is a gapless number's state in the ledger.
type NumberState string

// The states of a gapless number.
const (
	StateIssued    NumberState = "issued"
	StateReserved  NumberState = "reserved"
	StateConfirmed NumberState = "confirmed"
	StateVoided    NumberState = "voided"
)

// IssuedNumber is a number of a gapless series, as an issue, reserve, confirm or void answers
// it. Replayed is true when the request repeated an earlier one of the same key.
type IssuedNumber struct {
	Tag        string      `json:"tag"`
	Period     int64       `json:"period"`
	Number     int64       `json:"number"`
	Key        string      `json:"key"`
	State      NumberState `json:"state"`
	IssuedMs   int64       `json:"issued_ms"`
	Replayed   bool        `json:"replayed"`
	Display    *string     `json:"display,omitempty"`
	DeadlineMs *int64      `json:"deadline_ms,omitempty"`
	Reason     *string     `json:"reason,omitempty"`
}

// String never shows a settlement secret (the answer's secret is not kept).
func (n IssuedNumber) String() string {
	return fmt.Sprintf("%s #%d (period %d, key %q, %s)", n.Tag, n.Number, n.Period, n.Key, n.State)
}
