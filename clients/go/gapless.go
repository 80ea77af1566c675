package leaf

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Gapless series: issue, reserve, confirm and void. Each is idempotent by its key: the same key
// always gets the same number, and a reservation is settled once, so a request whose answer was
// lost is sent again, to any node, and never consumes a second number or settles twice.
//
// A number belongs to the caller that took it: its token, or, for a client without a token
// (where the cluster allows it), its settlement secret. This client derives each key's secret
// from its settlement key (WithSettlementKey) as HMAC-SHA256 of "tag\x00key", in hex, and sends
// it with every gapless call, so its own retries, confirms and voids are recognised and nobody
// else's are (as the Rust client does).

// gaplessRequest is the body of the four gapless calls.
type gaplessRequest struct {
	Key         string  `json:"key"`
	Secret      *string `json:"secret,omitempty"`
	HoldSeconds *int64  `json:"hold_seconds,omitempty"`
	Reason      *string `json:"reason,omitempty"`
}

// secret is the settlement secret of key in series tag, sent only without a token.
func (c *Client) secret(tag, key string) *string {
	if c.auth != "" {
		return nil
	}
	m := hmac.New(sha256.New, c.settlementKey[:])
	m.Write([]byte(tag))
	m.Write([]byte{0})
	m.Write([]byte(key))
	s := hex.EncodeToString(m.Sum(nil))
	return &s
}

// gapless sends one gapless call and checks the answer: for this tag and key, numbered from
// 1, in one of states (any when none).
func (c *Client) gapless(ctx context.Context, r Route, tag string, req gaplessRequest, states ...NumberState) (IssuedNumber, error) {
	var n IssuedNumber
	if err := validTag(tag, "tag"); err != nil {
		return n, err
	}
	if err := validKey(req.Key); err != nil {
		return n, err
	}
	req.Secret = c.secret(tag, req.Key)
	body, err := jsonBody(req)
	if err != nil {
		return n, err
	}
	a, err := c.execute(ctx, &call{method: "POST", path: r.path(tag), body: body, tag: tag})
	if err != nil {
		return n, err
	}
	if err := decodeJSON(a, &n); err != nil {
		return IssuedNumber{}, err
	}
	if n.Tag != tag || n.Key != req.Key || n.Number == 0 {
		return IssuedNumber{}, a.decodeError("asked for tag %q key %q, answered number %d of tag %q key %q", tag, req.Key, n.Number, n.Tag, n.Key)
	}
	if len(states) > 0 {
		ok := false
		for _, s := range states {
			ok = ok || n.State == s
		}
		if !ok {
			return IssuedNumber{}, a.decodeError("number %d of key %q answered as %s", n.Number, req.Key, n.State)
		}
	}
	return n, nil
}

// IssueNumber returns the number of gapless series tag for key (POST
// /api/gapless/{tag}/issue): the next one, or the one the key already has (Replayed).
func (c *Client) IssueNumber(ctx context.Context, tag, key string) (IssuedNumber, error) {
	return c.gapless(ctx, routeGaplessIssue, tag, gaplessRequest{Key: key})
}

// ReserveNumber returns the next number for key, reserved for holdSeconds (0: the server's
// 900 s) (POST /api/gapless/{tag}/reserve). Confirm or void it before its DeadlineMs.
func (c *Client) ReserveNumber(ctx context.Context, tag, key string, holdSeconds int64) (IssuedNumber, error) {
	if err := validHold(holdSeconds); err != nil {
		return IssuedNumber{}, err
	}
	req := gaplessRequest{Key: key}
	if holdSeconds > 0 {
		req.HoldSeconds = &holdSeconds
	}
	return c.gapless(ctx, routeGaplessReserve, tag, req)
}

// ConfirmNumber makes the key's reserved number final (POST /api/gapless/{tag}/confirm);
// checked: the answer is confirmed (or issued, for a number final from the start).
func (c *Client) ConfirmNumber(ctx context.Context, tag, key string) (IssuedNumber, error) {
	return c.gapless(ctx, routeGaplessConfirm, tag, gaplessRequest{Key: key}, StateConfirmed, StateIssued)
}

// VoidNumber voids the key's reserved number for reason (POST /api/gapless/{tag}/void): it
// keeps its place, never reissued. Checked: the answer is voided.
func (c *Client) VoidNumber(ctx context.Context, tag, key, reason string) (IssuedNumber, error) {
	if err := validReason(reason); err != nil {
		return IssuedNumber{}, err
	}
	return c.gapless(ctx, routeGaplessVoid, tag, gaplessRequest{Key: key, Reason: &reason}, StateVoided)
}
