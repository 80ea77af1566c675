package leaf

import (
	"encoding/json"
	"fmt"
)

// The fields docs/openapi.json marks required are required here too: a node's answer missing
// one is malformed (a DecodeError), not a zero. (encoding/json leaves a missing field zero.)

// UnmarshalJSON reads a range, refusing one without start or end.
func (r *IDRange) UnmarshalJSON(b []byte) error {
	var w struct {
		Start *int64 `json:"start"`
		End   *int64 `json:"end"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Start == nil || w.End == nil {
		return fmt.Errorf("a range without start or end: %s", clip(b))
	}
	r.Start, r.End = *w.Start, *w.End
	return nil
}

// UnmarshalJSON reads a decoded snowflake ID, refusing one without any of its fields.
func (s *SnowflakeID) UnmarshalJSON(b []byte) error {
	var w struct {
		ID          *int64  `json:"id"`
		TimestampMs *int64  `json:"timestamp_ms"`
		Timestamp   *string `json:"timestamp"`
		WorkerID    *int64  `json:"worker_id"`
		Sequence    *int64  `json:"sequence"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.ID == nil || w.TimestampMs == nil || w.Timestamp == nil || w.WorkerID == nil || w.Sequence == nil {
		return fmt.Errorf("a decoded snowflake ID without id, timestamp_ms, timestamp, worker_id or sequence: %s", clip(b))
	}
	*s = SnowflakeID{ID: *w.ID, TimestampMs: *w.TimestampMs, Timestamp: *w.Timestamp, WorkerID: *w.WorkerID, Sequence: *w.Sequence}
	return nil
}

// healthReport reads /health's answer: a report (ready, node_id, term and snowflake present),
// whatever its status; otherwise, from a 503, the error it carries (a node shutting down, over
// its connection limit), and from a 200 a DecodeError.
func healthReport(a *answer) (Health, error) {
	var w struct {
		Ready     *bool           `json:"ready"`
		NodeID    *int64          `json:"node_id"`
		Term      *int64          `json:"term"`
		Snowflake json.RawMessage `json:"snowflake"`
	}
	var out Health
	if json.Unmarshal(a.body, &w) == nil && w.Ready != nil && w.NodeID != nil && w.Term != nil && len(w.Snowflake) > 0 {
		if err := decodeJSON(a, &out); err != nil {
			return Health{}, err
		}
		return out, nil
	}
	if a.status != 200 {
		return Health{}, errorOf(a.node, &raw{status: a.status, body: a.body})
	}
	return Health{}, a.decodeError("not a health report: %s", clip(a.body))
}

// clip is at most 200 bytes of b, for a message.
func clip(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return fmt.Sprintf("%q", b)
}
