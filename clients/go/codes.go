package leaf

// ErrorCode is one of the stable error codes of the HTTP API (the `code` of every error body,
// `ErrorCode` in docs/openapi.json). An ErrorCode is also an error value, so
// errors.Is(err, leaf.CodeTagNotFound) tells whether a call failed with that code (an
// *APIError or an *InvalidArgumentError, looking through a *GaveUpError).
type ErrorCode string

// Every code of docs/openapi.json (the contract test checks the list both ways).
const (
	CodeInvalidTag           ErrorCode = "invalid_tag"
	CodeInvalidCount         ErrorCode = "invalid_count"
	CodeInvalidRequest       ErrorCode = "invalid_request"
	CodePayloadTooLarge      ErrorCode = "payload_too_large"
	CodeUnauthorized         ErrorCode = "unauthorized"
	CodeForbidden            ErrorCode = "forbidden"
	CodeTagNotFound          ErrorCode = "tag_not_found"
	CodeNotFound             ErrorCode = "not_found"
	CodeMethodNotAllowed     ErrorCode = "method_not_allowed"
	CodeTagExists            ErrorCode = "tag_exists"
	CodeTagExhausted         ErrorCode = "tag_exhausted"
	CodeSegmentsNotReady     ErrorCode = "segments_not_ready"
	CodeNotReady             ErrorCode = "not_ready"
	CodeUnavailable          ErrorCode = "unavailable"
	CodeShuttingDown         ErrorCode = "shutting_down"
	CodeMemberExists         ErrorCode = "member_exists"
	CodeNodeIDRetired        ErrorCode = "node_id_retired"
	CodeMemberNotFound       ErrorCode = "member_not_found"
	CodeSnowflakeUnavailable ErrorCode = "snowflake_unavailable"
	CodeClockMovedBackwards  ErrorCode = "clock_moved_backwards"
	CodeWorkerIDsExhausted   ErrorCode = "worker_ids_exhausted"
	CodeRateLimited          ErrorCode = "rate_limited"
	CodeTokenNotFound        ErrorCode = "token_not_found"
	CodeTemplateNotFound     ErrorCode = "template_not_found"
	CodeTemplateConflict     ErrorCode = "template_conflict"
	CodeWrongProfile         ErrorCode = "wrong_profile"
	CodeNumberNotFound       ErrorCode = "number_not_found"
	CodeNumberConflict       ErrorCode = "number_conflict"
	CodeFeatureNotActive     ErrorCode = "feature_not_active"
	CodeMembershipConflict   ErrorCode = "membership_conflict"
	CodeTokenExists          ErrorCode = "token_exists"
	CodeRegionConflict       ErrorCode = "region_conflict"
)

// statusOfCode is the HTTP status each code is answered with (docs/src/http-api.md,
// "Errors"); used for the errors of arguments refused locally.
var statusOfCode = map[ErrorCode]int{
	CodeInvalidTag:           400,
	CodeInvalidCount:         400,
	CodeInvalidRequest:       400,
	CodePayloadTooLarge:      413,
	CodeUnauthorized:         401,
	CodeForbidden:            403,
	CodeTagNotFound:          404,
	CodeNotFound:             404,
	CodeMethodNotAllowed:     405,
	CodeTagExists:            409,
	CodeTagExhausted:         409,
	CodeSegmentsNotReady:     503,
	CodeNotReady:             503,
	CodeUnavailable:          503,
	CodeShuttingDown:         503,
	CodeMemberExists:         409,
	CodeNodeIDRetired:        409,
	CodeMemberNotFound:       404,
	CodeSnowflakeUnavailable: 503,
	CodeClockMovedBackwards:  503,
	CodeWorkerIDsExhausted:   503,
	CodeRateLimited:          429,
	CodeTokenNotFound:        404,
	CodeTemplateNotFound:     404,
	CodeTemplateConflict:     409,
	CodeWrongProfile:         409,
	CodeNumberNotFound:       404,
	CodeNumberConflict:       409,
	CodeFeatureNotActive:     409,
	CodeMembershipConflict:   409,
	CodeTokenExists:          409,
	CodeRegionConflict:       409,
}

// ErrorCodes returns every code this client knows, in no particular order.
func ErrorCodes() []ErrorCode {
	out := make([]ErrorCode, 0, len(statusOfCode))
	for c := range statusOfCode {
		out = append(out, c)
	}
	return out
}

// Known reports whether c is a code of the API this client knows (a newer server may answer
// others; they are kept as sent).
func (c ErrorCode) Known() bool {
	_, ok := statusOfCode[c]
	return ok
}

// Status is the HTTP status the API answers with this code (0 for an unknown code).
func (c ErrorCode) Status() int { return statusOfCode[c] }

// Error makes an ErrorCode usable as the target of errors.Is.
func (c ErrorCode) Error() string { return string(c) }

// String is the code as the API spells it.
func (c ErrorCode) String() string { return string(c) }
