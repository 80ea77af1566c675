package leaf

import (
	"net/url"
	"strings"
)

// Route is one endpoint the client calls: its method and path template as in
// docs/openapi.json.
type Route struct {
	Method   string
	Template string
}

// The endpoints of the client (the contract test checks each against docs/openapi.json).
var (
	routeSegmentGet     = Route{"GET", "/api/segment/get/{tag}"}
	routeSnowflakeGet   = Route{"GET", "/api/snowflake/get/{key}"}
	routeSnowflakeDec   = Route{"GET", "/api/snowflake/decode/{id}"}
	routeHealth         = Route{"GET", "/health"}
	routeTagsCreate     = Route{"POST", "/admin/tags"}
	routeTagGet         = Route{"GET", "/admin/tags/{tag}"}
	routeTagArchive     = Route{"POST", "/admin/tags/{tag}/archive"}
	routeTagRestore     = Route{"POST", "/admin/tags/{tag}/restore"}
	routeGaplessIssue   = Route{"POST", "/api/gapless/{tag}/issue"}
	routeGaplessReserve = Route{"POST", "/api/gapless/{tag}/reserve"}
	routeGaplessConfirm = Route{"POST", "/api/gapless/{tag}/confirm"}
	routeGaplessVoid    = Route{"POST", "/api/gapless/{tag}/void"}
)

// Routes lists every endpoint this client calls.
func Routes() []Route {
	return []Route{
		routeSegmentGet, routeSnowflakeGet, routeSnowflakeDec, routeHealth,
		routeTagsCreate, routeTagGet, routeTagArchive, routeTagRestore,
		routeGaplessIssue, routeGaplessReserve, routeGaplessConfirm, routeGaplessVoid,
	}
}

// path is the template with its {...} parameters replaced, in order, URL-escaped.
func (r Route) path(segments ...string) string {
	out := r.Template
	for _, seg := range segments {
		start := strings.IndexByte(out, '{')
		end := strings.IndexByte(out, '}')
		if start < 0 || end < start {
			break
		}
		out = out[:start] + url.PathEscape(seg) + out[end+1:]
	}
	return out
}
