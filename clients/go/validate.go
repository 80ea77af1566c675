package leaf

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Arguments are checked before anything is sent, as the server checks them
// (docs/openapi.json): a refusal is an *InvalidArgumentError with the code the server would
// answer.

const (
	// MaxTagLen is the longest tag (or snowflake key), in bytes.
	MaxTagLen = 128
	// MaxBatch is the most IDs of a batch answered one per line.
	MaxBatch = 100_000
	// MaxRangeBatch is the most IDs of a batch answered as ranges (and of a pool's lease).
	MaxRangeBatch = 1_000_000
	// MaxHoldSeconds is the longest reservation hold (30 days).
	MaxHoldSeconds = 2_592_000
	// MaxStep is the largest step of a tag.
	MaxStep = 1_000_000_000
	// MaxKeyLen is the longest gapless idempotency key.
	MaxKeyLen = 128
	// MaxReasonLen is the longest void reason, in characters.
	MaxReasonLen = 256
	// MaxDescriptionLen is the longest tag description, in bytes of UTF-8.
	MaxDescriptionLen = 1024
)

func short(s string) string {
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strconv.Quote(s)
}

// validTag checks a tag (what: "tag" or "snowflake key"): 1 to 128 characters of
// [A-Za-z0-9_.:-].
func validTag(tag, what string) error {
	ok := len(tag) >= 1 && len(tag) <= MaxTagLen
	for i := 0; ok && i < len(tag); i++ {
		c := tag[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == ':' || c == '-'
	}
	if !ok {
		return invalid(CodeInvalidTag, "%s %s must be 1 to 128 characters of [A-Za-z0-9_.:-]", what, short(tag))
	}
	return nil
}

// validCount checks a batch size from 1 to most.
func validCount(n, most int) error {
	if n < 1 || n > most {
		return invalid(CodeInvalidCount, "count %d must be from 1 to %d", n, most)
	}
	return nil
}

// validKey checks a gapless idempotency key: 1 to 128 characters of printable ASCII.
func validKey(key string) error {
	ok := len(key) >= 1 && len(key) <= MaxKeyLen
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] >= ' ' && key[i] <= '~'
	}
	if !ok {
		return invalid(CodeInvalidRequest, "key %s must be 1 to 128 printable ASCII characters", short(key))
	}
	return nil
}

func isControl(r rune) bool { return r <= 0x1f || (r >= 0x7f && r <= 0x9f) }

// validReason checks a void's reason: 1 to 256 characters, no control character, not only
// spaces.
func validReason(reason string) error {
	n := utf8.RuneCountInString(reason)
	ok := utf8.ValidString(reason) && n >= 1 && n <= MaxReasonLen && strings.Trim(reason, " ") != ""
	if ok && strings.IndexFunc(reason, isControl) >= 0 {
		ok = false
	}
	if !ok {
		return invalid(CodeInvalidRequest, "reason must be 1 to %d characters without control characters, not only spaces", MaxReasonLen)
	}
	return nil
}

// validHold checks a reservation hold: 0 (the server's 900 s) or 1 to 2,592,000 seconds.
func validHold(seconds int64) error {
	if seconds < 0 || seconds > MaxHoldSeconds {
		return invalid(CodeInvalidRequest, "hold seconds %d must be from 1 to %d (0: the server's default)", seconds, MaxHoldSeconds)
	}
	return nil
}

// validCreate checks a tag creation.
func validCreate(req CreateTagRequest) error {
	if err := validTag(req.Tag, "tag"); err != nil {
		return err
	}
	if req.Step < 1 || req.Step > MaxStep {
		return invalid(CodeInvalidRequest, "step %d must be from 1 to %d", req.Step, MaxStep)
	}
	if req.MaxID != nil && *req.MaxID < 0 {
		return invalid(CodeInvalidRequest, "max_id %d must not be negative", *req.MaxID)
	}
	if len(req.Description) > MaxDescriptionLen {
		return invalid(CodeInvalidRequest, "description must be at most %d bytes", MaxDescriptionLen)
	}
	if req.UpperBound != nil && *req.UpperBound < 0 {
		return invalid(CodeInvalidRequest, "upper_bound %d must not be negative", *req.UpperBound)
	}
	return nil
}
