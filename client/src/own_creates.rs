//! Reading one's own creates.
//!
//! A node caught up with its leader answers a request for a tag it does not hold with 404 from
//! its own state, without asking the leader. A tag just created through another node may
//! therefore be unknown on this one for a moment, until the leader's next message carries the
//! create's commit (at most `2 × raft.heartbeat_ms`, 200 ms by default). The node that answered
//! a create knows the tag when it answers, and a client keeps calling the node that answered
//! last; but a client whose next call lands elsewhere (that node failed, or the client was
//! built over other nodes) could see its own tag missing. So the client remembers the tags it
//! created in the last [`GRACE`] and retries a `tag_not_found` for one of them until the
//! grace runs out, without spending its retry budget. An application that keeps one client
//! per node shares this memory between them ([`ClientBuilder::own_creates`]); a tag the
//! client archives is forgotten (an archived tag is 404 for good).
//!
//! [`ClientBuilder::own_creates`]: crate::ClientBuilder::own_creates
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after its create a tag's `tag_not_found` is retried: well above the default
/// staleness (500 ms) and a few heartbeats of a slower cluster.
pub(crate) const GRACE: Duration = Duration::from_secs(3);

/// The wait between such retries.
pub(crate) const RETRY_EVERY: Duration = Duration::from_millis(25);

/// Tags remembered at most (the oldest are forgotten first).
const KEEP: usize = 1024;

/// The tags a client created recently: a handle, cloned to share it between clients
/// ([`Client::own_creates`](crate::Client::own_creates),
/// [`ClientBuilder::own_creates`](crate::ClientBuilder::own_creates)).
#[derive(Debug, Clone, Default)]
pub struct OwnCreates {
    recent: Arc<Mutex<VecDeque<(String, Instant)>>>,
}

impl OwnCreates {
    /// Remembers that this client created `tags` just now.
    pub(crate) fn created<'a>(&self, tags: impl IntoIterator<Item = &'a str>) {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        while recent.front().is_some_and(|(_, at)| now.saturating_duration_since(*at) > GRACE) {
            recent.pop_front();
        }
        for tag in tags {
            if recent.len() >= KEEP {
                recent.pop_front();
            }
            recent.push_back((tag.to_string(), now));
        }
    }

    /// Forgets `tag` (archived: its 404 is the answer).
    pub(crate) fn forget(&self, tag: &str) {
        self.recent.lock().unwrap_or_else(|e| e.into_inner()).retain(|(t, _)| t != tag);
    }

    /// Whether this client created `tag` less than [`GRACE`] ago.
    pub(crate) fn within_grace(&self, tag: &str) -> bool {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.iter().rev().any(|(t, at)| t == tag && at.elapsed() < GRACE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_recent_creates_and_forgets_the_oldest_past_the_cap() {
        let own = OwnCreates::default();
        assert!(!own.within_grace("a"));
        own.created(["a", "b"]);
        assert!(own.within_grace("a") && own.within_grace("b") && !own.within_grace("c"));
        let many: Vec<String> = (0..KEEP).map(|i| format!("t{i}")).collect();
        own.created(many.iter().map(String::as_str));
        assert!(!own.within_grace("a"), "pushed out by newer creates");
        assert!(own.within_grace("t0") && own.within_grace(&format!("t{}", KEEP - 1)));
        assert!(own.recent.lock().unwrap().len() <= KEEP);
    }

    #[test]
    fn clones_share_what_they_remember_and_an_archive_forgets() {
        let own = OwnCreates::default();
        let other = own.clone();
        own.created(["a", "b"]);
        assert!(other.within_grace("a") && other.within_grace("b"));
        other.forget("a");
        assert!(!own.within_grace("a") && own.within_grace("b"));
        assert!(!OwnCreates::default().within_grace("b"), "a new memory shares nothing");
    }
}
