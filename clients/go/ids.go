package leaf

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The ID endpoints: segment and snowflake IDs, single, batches and ranges, and decoding. All
// are idempotent (see retry.go): an ID request whose answer was lost wasted those IDs (a gap),
// and the retry gets new ones; no ID is ever handed out twice.

// SegmentID returns one segment ID of tag (GET /api/segment/get/{tag}).
func (c *Client) SegmentID(ctx context.Context, tag string) (int64, error) {
	if err := validTag(tag, "tag"); err != nil {
		return 0, err
	}
	a, err := c.execute(ctx, &call{method: "GET", path: routeSegmentGet.path(tag), tag: tag})
	if err != nil {
		return 0, err
	}
	return oneID(a)
}

// SegmentIDs returns count (1–100,000) segment IDs of tag, in the order the node handed them
// out (GET /api/segment/get/{tag}?count=n).
func (c *Client) SegmentIDs(ctx context.Context, tag string, count int) ([]int64, error) {
	if err := validTag(tag, "tag"); err != nil {
		return nil, err
	}
	if err := validCount(count, MaxBatch); err != nil {
		return nil, err
	}
	path := fmt.Sprintf("%s?count=%d", routeSegmentGet.path(tag), count)
	a, err := c.execute(ctx, &call{method: "GET", path: path, tag: tag})
	if err != nil {
		return nil, err
	}
	return ids(a, count)
}

// SegmentRanges returns count (1–1,000,000) segment IDs of tag as ranges [start, end)
// (?format=ranges), checked: well-formed and exactly count IDs.
func (c *Client) SegmentRanges(ctx context.Context, tag string, count int) (IDRanges, error) {
	if err := validTag(tag, "tag"); err != nil {
		return IDRanges{}, err
	}
	if err := validCount(count, MaxRangeBatch); err != nil {
		return IDRanges{}, err
	}
	path := fmt.Sprintf("%s?count=%d&format=ranges", routeSegmentGet.path(tag), count)
	a, err := c.execute(ctx, &call{method: "GET", path: path, tag: tag})
	if err != nil {
		return IDRanges{}, err
	}
	return ranges(a, count)
}

// SnowflakeID returns one snowflake ID (key is recorded for auditing, validated like a tag;
// GET /api/snowflake/get/{key}).
func (c *Client) SnowflakeID(ctx context.Context, key string) (int64, error) {
	if err := validTag(key, "snowflake key"); err != nil {
		return 0, err
	}
	a, err := c.execute(ctx, &call{method: "GET", path: routeSnowflakeGet.path(key)})
	if err != nil {
		return 0, err
	}
	return oneID(a)
}

// SnowflakeIDs returns count (1–100,000) snowflake IDs.
func (c *Client) SnowflakeIDs(ctx context.Context, key string, count int) ([]int64, error) {
	if err := validTag(key, "snowflake key"); err != nil {
		return nil, err
	}
	if err := validCount(count, MaxBatch); err != nil {
		return nil, err
	}
	path := fmt.Sprintf("%s?count=%d", routeSnowflakeGet.path(key), count)
	a, err := c.execute(ctx, &call{method: "GET", path: path})
	if err != nil {
		return nil, err
	}
	return ids(a, count)
}

// SnowflakeRanges returns count (1–1,000,000) snowflake IDs as ranges (about one per
// millisecond the batch spans), checked like SegmentRanges.
func (c *Client) SnowflakeRanges(ctx context.Context, key string, count int) (IDRanges, error) {
	if err := validTag(key, "snowflake key"); err != nil {
		return IDRanges{}, err
	}
	if err := validCount(count, MaxRangeBatch); err != nil {
		return IDRanges{}, err
	}
	path := fmt.Sprintf("%s?count=%d&format=ranges", routeSnowflakeGet.path(key), count)
	a, err := c.execute(ctx, &call{method: "GET", path: path})
	if err != nil {
		return IDRanges{}, err
	}
	return ranges(a, count)
}

// Decode returns a snowflake ID's time, worker ID and sequence as the server decodes it
// (GET /api/snowflake/decode/{id}; the epoch is the server's: there is no local decode).
func (c *Client) Decode(ctx context.Context, id int64) (SnowflakeID, error) {
	var out SnowflakeID
	if id < 0 {
		return out, invalid(CodeInvalidRequest, "id %d must be from 0 to 2^63 - 1", id)
	}
	a, err := c.execute(ctx, &call{method: "GET", path: routeSnowflakeDec.path(strconv.FormatInt(id, 10))})
	if err != nil {
		return out, err
	}
	if err := decodeJSON(a, &out); err != nil {
		return out, err
	}
	if out.ID != id {
		return out, a.decodeError("asked to decode %d, answered %d", id, out.ID)
	}
	return out, nil
}

// Health returns the /health report of the node the call lands on (mode: HealthAll,
// HealthSegment or HealthSnowflake). A node that is not ready answers too (Ready false).
func (c *Client) Health(ctx context.Context, mode HealthMode) (Health, error) {
	var out Health
	if mode != HealthAll && mode != HealthSegment && mode != HealthSnowflake {
		return out, invalid(CodeInvalidRequest, "health mode %q must be empty, segment or snowflake", string(mode))
	}
	path := routeHealth.path()
	if mode != HealthAll {
		path += "?mode=" + string(mode)
	}
	a, err := c.execute(ctx, &call{method: "GET", path: path, alsoOK: 503})
	if err != nil {
		return out, err
	}
	return healthReport(a)
}

// parseID reads a non-negative decimal ID.
func parseID(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// oneID reads the body as exactly one decimal ID.
func oneID(a *answer) (int64, error) {
	text := string(a.body)
	id, ok := parseID(text)
	if !ok {
		return 0, a.decodeError("not an ID: %q", truncate(text))
	}
	return id, nil
}

// ids reads the body as exactly count decimal IDs, one per line.
func ids(a *answer, count int) ([]int64, error) {
	text := strings.TrimSuffix(string(a.body), "\n")
	if text == "" {
		return nil, a.decodeError("0 IDs, asked for %d", count)
	}
	lines := strings.Count(text, "\n") + 1
	if lines != count {
		return nil, a.decodeError("%d IDs, asked for %d", lines, count)
	}
	out := make([]int64, 0, count)
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		id, ok := parseID(line)
		if !ok {
			return nil, a.decodeError("not an ID: %q", truncate(line))
		}
		out = append(out, id)
	}
	if len(out) != count {
		return nil, a.decodeError("%d IDs, asked for %d", len(out), count)
	}
	return out, nil
}

// ranges reads the body as well-formed ranges holding exactly count IDs.
func ranges(a *answer, count int) (IDRanges, error) {
	var r IDRanges
	if err := decodeJSON(a, &r); err != nil {
		return IDRanges{}, err
	}
	if err := r.Check(int64(count)); err != nil {
		return IDRanges{}, a.decodeError("%v", err)
	}
	return r, nil
}
