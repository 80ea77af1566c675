// Package leaf is the Go client of leaf, the distributed ID service (successor of Meituan's
// Leaf): segment and snowflake IDs, batches and ranges, tags, gapless series, and an IdPool of
// client-side leased ranges. It has the semantics of the Rust client in client/: the same
// failover, retry rules, typed errors and pool. Standard library only.
//
//	c, err := leaf.New([]string{"https://10.0.0.1:8080", "https://10.0.0.2:8080"},
//		leaf.WithCAFile("ca.pem"), leaf.WithToken(os.Getenv("LEAF_ADMIN_TOKEN")))
//	id, err := c.SegmentID(ctx, "orders")
//
// Over several nodes: any node serves every call. A call starts at the node that answered
// last; an attempt that fails in a way worth retrying (no answer, a timeout, a 503 with a
// transient code) moves on to the next node after a capped exponential backoff with jitter,
// until the retry budget, the call's deadline or its context runs out (*GaveUpError). Other
// errors are returned at once as *APIError. ID requests, reads, archives, restores and gapless
// calls are retried; creating a tag only when the connection could not be opened.
//
// Layout: client.go (Client, options, the attempt loop), retry.go (what is retried, the
// backoff), transport.go (one attempt, TLS, bounded answers), errors.go and codes.go (typed
// errors), validate.go (arguments checked before sending), ids.go, admin.go, gapless.go (the
// calls), routes.go (the endpoints), owncreates.go (reading one's own creates), pool*.go (the
// IdPool).
package leaf
