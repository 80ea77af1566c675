//! A new learner's proof that it holds the cluster secret, asked for before a leader on a
//! cluster without TLS sends it anything. Every internal request carries the secret in a
//! header, and the first appends carry the whole state (token hashes, obfuscation keys): a
//! learner added at a wrong or hostile address would receive both. With TLS the handshake
//! proves the learner instead (its certificate must name its node ID).
//!
//! The leader sends a [`Challenge`] (the learner's node ID and a fresh random nonce) without
//! the secret; the node answers an HMAC-SHA256 over both, keyed with its cluster secret, only
//! if it is that node. The tag has its own domain string, so an answer is good for nothing
//! else; the endpoint reveals neither the secret nor its length.
use std::time::Duration;

use leaf_raft_store::types::NodeId;
use ring::hmac;
use serde::{Deserialize, Serialize};

use super::network::{CallError, PeerClient};

/// The endpoint a node answers challenges on (no secret needed, plaintext clusters only).
pub const PATH_LEARNER_PROOF: &str = "/internal/learner-proof";
/// Keeps these tags apart from any other use of the secret.
const DOMAIN: &[u8] = b"leaf learner proof v1\0";

/// What the leader asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// The node ID the learner is being added as.
    pub node_id: NodeId,
    /// Fresh per request, so an answer cannot be replayed.
    pub nonce: [u8; 32],
}

impl Challenge {
    /// A challenge with a nonce from the OS's random source.
    pub fn new(node_id: NodeId) -> Self {
        Challenge { node_id, nonce: rand::random() }
    }
}

/// The node's answer: the tag over the challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    pub tag: Vec<u8>,
}

fn message(c: &Challenge) -> Vec<u8> {
    [DOMAIN, &c.node_id.to_be_bytes(), &c.nonce].concat()
}

/// The answer of a node holding `secret` to `challenge`.
pub fn prove(secret: &[u8], challenge: &Challenge) -> Proof {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    Proof { tag: hmac::sign(&key, &message(challenge)).as_ref().to_vec() }
}

/// Whether `proof` answers `challenge` with `secret` (constant time).
pub fn verify(secret: &[u8], challenge: &Challenge, proof: &Proof) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    hmac::verify(&key, &message(challenge), &proof.tag).is_ok()
}

/// Why a node was not admitted as a learner.
#[derive(Debug, thiserror::Error)]
pub enum Unproven {
    /// Nothing usable came back: not started yet, wrong address, down (worth a retry).
    #[error("node {node_id} at {addr} did not answer the learner proof ({error}); start it with this cluster's cluster_secret before adding it")]
    NoAnswer { node_id: NodeId, addr: String, error: CallError },
    /// It answered, and not as node `node_id` holding this cluster's secret.
    #[error("the node at {addr} did not prove that it is node {node_id} with this cluster's cluster_secret{detail}; nothing was sent to it")]
    Refused { node_id: NodeId, addr: String, detail: String },
}

/// Asks the node at `addr` to prove that it is `node_id` and holds `secret`, without sending
/// the secret.
pub async fn ask(
    peers: &PeerClient,
    secret: &[u8],
    node_id: NodeId,
    addr: &str,
    timeout: Duration,
) -> Result<(), Unproven> {
    let challenge = Challenge::new(node_id);
    let refused = |detail: String| Unproven::Refused { node_id, addr: addr.to_string(), detail };
    match peers.call_unproven::<_, Proof>(node_id, addr, PATH_LEARNER_PROOF, &challenge, timeout).await {
        Ok(proof) if verify(secret, &challenge, &proof) => Ok(()),
        Ok(_) => Err(refused(String::new())),
        Err(CallError::Refused { status, body, .. }) => {
            Err(refused(format!(" (HTTP {status}: {})", body.chars().take(200).collect::<String>())))
        }
        Err(e @ CallError::Decode { .. }) => Err(refused(format!(" ({e})"))),
        Err(error) => Err(Unproven::NoAnswer { node_id, addr: addr.to_string(), error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_secret_node_and_nonce_verify() {
        let c = Challenge::new(4);
        let p = prove(b"s3cret", &c);
        assert!(verify(b"s3cret", &c, &p));
        assert!(!verify(b"other", &c, &p), "another secret");
        assert!(!verify(b"s3cret", &Challenge { node_id: 5, ..c.clone() }, &p), "another node");
        assert!(!verify(b"s3cret", &Challenge::new(4), &p), "another nonce");
        assert!(!verify(b"s3cret", &c, &Proof { tag: p.tag[..31].to_vec() }), "a cut tag");
        assert_ne!(Challenge::new(4).nonce, Challenge::new(4).nonce);
    }
}
