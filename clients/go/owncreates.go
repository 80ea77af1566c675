package leaf

import (
	"sync"
	"time"
)

// Reading one's own creates (the Rust client's own_creates.rs).
//
// A node caught up with its leader answers a request for a tag it does not hold with 404 from
// its own state. A tag just created through another node may therefore be unknown on this one
// for a moment (about two heartbeats). So the client remembers the tags it created in the last
// ownCreatesGrace and retries a tag_not_found for one of them every ownCreatesRetryEvery until
// the grace runs out, without spending its retry budget. Archiving a tag through the client
// forgets it (an archived tag is 404 for good).

const (
	ownCreatesGrace      = 3 * time.Second
	ownCreatesRetryEvery = 25 * time.Millisecond
	ownCreatesKeep       = 1024
)

// OwnCreates is the memory of the tags a client created recently; safe for concurrent use and
// shareable between clients (WithOwnCreates) so a tag created through one is retried through a
// tag_not_found on another.
type OwnCreates struct {
	mu     sync.Mutex
	recent []ownCreate
}

type ownCreate struct {
	tag string
	at  time.Time
}

// NewOwnCreates returns an empty memory.
func NewOwnCreates() *OwnCreates { return &OwnCreates{} }

func (o *OwnCreates) created(tag string) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.recent) && now.Sub(o.recent[i].at) > ownCreatesGrace {
		i++
	}
	o.recent = o.recent[i:]
	if len(o.recent) >= ownCreatesKeep {
		o.recent = o.recent[1:]
	}
	o.recent = append(o.recent, ownCreate{tag, now})
}

func (o *OwnCreates) forget(tag string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	kept := o.recent[:0]
	for _, r := range o.recent {
		if r.tag != tag {
			kept = append(kept, r)
		}
	}
	o.recent = kept
}

// WithinGrace reports whether a client sharing this memory created tag less than 3 s ago.
func (o *OwnCreates) WithinGrace(tag string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(o.recent) - 1; i >= 0; i-- {
		if o.recent[i].tag == tag && time.Since(o.recent[i].at) < ownCreatesGrace {
			return true
		}
	}
	return false
}
