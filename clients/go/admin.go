package leaf

import (
	"context"
	"encoding/json"
)

// The tag endpoints (the client's token is sent as a bearer token). Retry safety (retry.go):
// creating a tag is at most once (retried only when the connection could not be opened, since a
// retry after a lost answer would turn the success into tag_exists); reading, archiving and
// restoring are idempotent.

// CreateTag creates a tag (POST /admin/tags). At most once. A tag that exists is an *APIError
// with CodeTagExists (409).
func (c *Client) CreateTag(ctx context.Context, req CreateTagRequest) (TagInfo, error) {
	if err := validCreate(req); err != nil {
		return TagInfo{}, err
	}
	body, err := jsonBody(req)
	if err != nil {
		return TagInfo{}, err
	}
	a, err := c.execute(ctx, &call{method: "POST", path: routeTagsCreate.path(), body: body, safety: atMostOnce})
	if err != nil {
		return TagInfo{}, err
	}
	info, err := tagInfo(a, req.Tag)
	if err == nil {
		c.own.created(info.Tag)
	}
	return info, err
}

// Tag returns the tag as stored (GET /admin/tags/{tag}).
func (c *Client) Tag(ctx context.Context, tag string) (TagInfo, error) {
	if err := validTag(tag, "tag"); err != nil {
		return TagInfo{}, err
	}
	a, err := c.execute(ctx, &call{method: "GET", path: routeTagGet.path(tag), tag: tag})
	if err != nil {
		return TagInfo{}, err
	}
	return tagInfo(a, tag)
}

// ArchiveTag archives tag (POST /admin/tags/{tag}/archive; idempotent): no ID is handed out
// for it again until it is restored.
func (c *Client) ArchiveTag(ctx context.Context, tag string) (TagInfo, error) {
	if err := validTag(tag, "tag"); err != nil {
		return TagInfo{}, err
	}
	// No tag: a tag_not_found here is answered at once, as the Rust client does (the tag is
	// being archived; a just-created one not yet known is not waited for).
	a, err := c.execute(ctx, &call{method: "POST", path: routeTagArchive.path(tag)})
	if err != nil {
		return TagInfo{}, err
	}
	c.own.forget(tag)
	return tagInfo(a, tag)
}

// RestoreTag serves an archived tag again (POST /admin/tags/{tag}/restore; idempotent).
func (c *Client) RestoreTag(ctx context.Context, tag string) (TagInfo, error) {
	if err := validTag(tag, "tag"); err != nil {
		return TagInfo{}, err
	}
	a, err := c.execute(ctx, &call{method: "POST", path: routeTagRestore.path(tag), tag: tag})
	if err != nil {
		return TagInfo{}, err
	}
	return tagInfo(a, tag)
}

// tagInfo reads a TagInfo answer for tag (keeping every field in Raw).
func tagInfo(a *answer, tag string) (TagInfo, error) {
	var info TagInfo
	if err := decodeJSON(a, &info); err != nil {
		return TagInfo{}, err
	}
	if err := json.Unmarshal(a.body, &info.Raw); err != nil {
		return TagInfo{}, a.decodeError("not a JSON object: %v", err)
	}
	if info.Tag != tag {
		return TagInfo{}, a.decodeError("asked about tag %q, answered %q", tag, info.Tag)
	}
	return info, nil
}
