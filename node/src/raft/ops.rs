//! The requests a follower forwards to the leader, each paired statically with its reply.
//!
//! Every forwarded operation is one type implementing [`ForwardOp`], which names its reply type
//! and its own internal route ([`OpKind::path`]). A request travels in a versioned
//! [`ForwardRequest`] (a node refuses a version it does not speak, before acting on it: a later
//! release can evolve the request); the reply travels in a [`ForwardAnswer`] naming the
//! operation it answers. So a caller gets `O::Reply` or an error, never "some answer" to
//! match: a garbled answer fails to decode and an answer for another operation is a
//! [`ForwardError::WrongKind`], both typed errors the router logs and counts like any answer
//! that fails [`super::answer`]'s checks.
//!
//! The state machine's results stay one type ([`Applied`], openraft allows one response type):
//! [`super::answer::Answer`] checks it and turns it into the caller's typed result.
use std::fmt::Debug;
use std::time::Duration;

use leaf_api::codec;
use leaf_api::types::MembershipChange;
use leaf_raft_store::types::NodeId;
use leaf_raft_store::{Applied, Op};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::network::{CallError, PeerClient};
use super::ProposeError;

/// The [`ForwardRequest`] version this release speaks.
pub const FORWARD_VERSION: u16 = 1;

/// Which operation a request or an answer is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    Propose,
    ReadIndex,
    AddLearner,
    Promote,
    Remove,
    QuorumAge,
    MonotonicTake,
}

impl OpKind {
    /// Every operation, for looking a route up.
    pub const ALL: [OpKind; 7] = [
        OpKind::Propose,
        OpKind::ReadIndex,
        OpKind::AddLearner,
        OpKind::Promote,
        OpKind::Remove,
        OpKind::QuorumAge,
        OpKind::MonotonicTake,
    ];

    /// The internal route the operation is forwarded on.
    pub const fn path(self) -> &'static str {
        match self {
            OpKind::Propose => "/internal/forward/propose",
            OpKind::ReadIndex => "/internal/forward/read-index",
            OpKind::AddLearner => "/internal/forward/add-learner",
            OpKind::Promote => "/internal/forward/promote",
            OpKind::Remove => "/internal/forward/remove",
            OpKind::QuorumAge => "/internal/forward/quorum-age",
            OpKind::MonotonicTake => "/internal/forward/monotonic-take",
        }
    }

    /// The operation forwarded on `path`, if any.
    pub fn from_path(path: &str) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.path() == path)
    }
}

/// A request only the leader can execute, and the type of the leader's reply.
pub trait ForwardOp: Serialize + DeserializeOwned + Debug + Clone + Send + Sync + 'static {
    type Reply: Serialize + DeserializeOwned + Debug + Send + 'static;
    /// Names the route ([`OpKind::path`]) and the answer ([`ForwardAnswer::op`]).
    const KIND: OpKind;
}

/// Commit a state machine operation; the leader stamps its clock into the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Propose {
    pub op: Op,
}

impl ForwardOp for Propose {
    /// The state machine's result (checked against `op`, then typed by the caller).
    type Reply = Applied;
    const KIND: OpKind = OpKind::Propose;
}

/// The log index a linearizable read must wait for (leadership confirmed by a quorum).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadIndex;

impl ForwardOp for ReadIndex {
    /// `None`: nothing to wait for.
    type Reply = Option<u64>;
    const KIND: OpKind = OpKind::ReadIndex;
}

/// Add a learner at `addr`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddLearner {
    pub node_id: NodeId,
    pub addr: String,
}

impl ForwardOp for AddLearner {
    type Reply = MembershipChange;
    const KIND: OpKind = OpKind::AddLearner;
}

/// Make a caught-up learner a voter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promote {
    pub node_id: NodeId,
}

impl ForwardOp for Promote {
    type Reply = MembershipChange;
    const KIND: OpKind = OpKind::Promote;
}

/// Remove a voter or learner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remove {
    pub node_id: NodeId,
}

impl ForwardOp for Remove {
    type Reply = MembershipChange;
    const KIND: OpKind = OpKind::Remove;
}

/// How long ago the leader last had a quorum acknowledgement (followers probe it, so their
/// `/health` is truthful when the leader lost its quorum).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumAge;

impl ForwardOp for QuorumAge {
    /// Milliseconds since the leader's last quorum acknowledgement (`None`: none yet).
    type Reply = Option<u64>;
    const KIND: OpKind = OpKind::QuorumAge;
}

/// Take `count` consecutive IDs of a monotonic tag; the leader answers the first (served by
/// the monotonic profile's hook, [`super::hooks::Served`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonotonicTake {
    pub tag: String,
    pub count: u32,
}

impl ForwardOp for MonotonicTake {
    /// The first ID: the IDs are `[first, first + count)`.
    type Reply = i64;
    const KIND: OpKind = OpKind::MonotonicTake;
}

/// A forwarded operation on the wire, with how long the sender will wait for the answer: the
/// leader gives up when the sender has, instead of finishing work whose result nobody receives
/// while the sender already retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardRequest<O> {
    /// [`FORWARD_VERSION`] of the sender; the leader refuses other versions.
    pub version: u16,
    pub budget_ms: u64,
    pub op: O,
}

/// The leader's answer to a [`ForwardRequest`], naming the operation it answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardAnswer<R> {
    pub op: OpKind,
    pub result: Result<R, ProposeError>,
}

/// Why a forwarded request was refused before the leader acted on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("forward request version {found}, this node speaks version {FORWARD_VERSION}")]
    Version { found: u16 },
    #[error("malformed forward request: {0}")]
    Malformed(String),
}

/// Decodes a forwarded request for `O`, refusing other versions: the operation and the
/// sender's budget. (A later version whose layout this one cannot decode is refused as
/// malformed: refused all the same, before anything is done.)
pub(crate) fn accept<O: ForwardOp>(body: &[u8]) -> Result<(O, Duration), Refused> {
    let wire: ForwardRequest<O> = codec::decode(body).map_err(|e| Refused::Malformed(e.to_string()))?;
    if wire.version != FORWARD_VERSION {
        return Err(Refused::Version { found: wire.version });
    }
    Ok((wire.op, Duration::from_millis(wire.budget_ms)))
}

/// Why a forwarded request produced no answer for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForwardError {
    /// No decodable answer (a garbled answer is a [`CallError::Decode`]).
    #[error(transparent)]
    Call(#[from] CallError),
    /// A decodable answer to another operation.
    #[error("{addr} answered a {got:?} request to a {asked:?} request")]
    WrongKind { addr: String, asked: OpKind, got: OpKind },
}

impl ForwardError {
    /// True when the peer cannot have acted on the request.
    pub fn surely_not_delivered(&self) -> bool {
        match self {
            ForwardError::Call(e) => e.surely_not_delivered(),
            ForwardError::WrongKind { .. } => false,
        }
    }

    /// True when the peer answered something this node refuses (not a transport failure).
    pub fn is_bad_answer(&self) -> bool {
        matches!(self, ForwardError::WrongKind { .. } | ForwardError::Call(CallError::Decode { .. }))
    }
}

/// Sends `op` to node `to` at `addr` (which executes it if it leads) and waits up to `timeout`,
/// which is also the budget the leader is given.
pub async fn call<O: ForwardOp>(
    peers: &PeerClient,
    to: NodeId,
    addr: &str,
    op: &O,
    timeout: Duration,
) -> Result<Result<O::Reply, ProposeError>, ForwardError> {
    let wire = ForwardRequest {
        version: FORWARD_VERSION,
        budget_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        op,
    };
    let answer: ForwardAnswer<O::Reply> = peers.call(to, addr, O::KIND.path(), &wire, timeout).await?;
    answer_for::<O>(addr, answer)
}

/// The result in `answer`, if it answers an `O`.
fn answer_for<O: ForwardOp>(
    addr: &str,
    answer: ForwardAnswer<O::Reply>,
) -> Result<Result<O::Reply, ProposeError>, ForwardError> {
    if answer.op != O::KIND {
        return Err(ForwardError::WrongKind { addr: addr.to_string(), asked: O::KIND, got: answer.op });
    }
    Ok(answer.result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<O: Serialize>(version: u16, op: O) -> Vec<u8> {
        codec::encode(&ForwardRequest { version, budget_ms: 1500, op }).unwrap()
    }

    #[test]
    fn every_operation_has_its_own_route() {
        for k in OpKind::ALL {
            assert_eq!(OpKind::from_path(k.path()), Some(k));
            assert!(k.path().starts_with("/internal/"), "{k:?}: not under the authenticated prefix");
        }
        assert_eq!(OpKind::from_path("/internal/forward"), None);
        assert_eq!(OpKind::from_path("/internal/forward/propose/"), None);
    }

    #[test]
    fn requests_of_another_version_are_refused() {
        let op = Promote { node_id: 4 };
        assert_eq!(
            accept::<Promote>(&request(FORWARD_VERSION, op.clone())),
            Ok((op.clone(), Duration::from_millis(1500)))
        );
        assert_eq!(accept::<Promote>(&request(2, op.clone())), Err(Refused::Version { found: 2 }));
        assert_eq!(accept::<Promote>(&request(0, op)), Err(Refused::Version { found: 0 }));
        // A later version whose body this one cannot read is refused too.
        let newer = request(7, (4u64, "a field this release does not know".to_string()));
        assert!(matches!(accept::<Promote>(&newer), Err(Refused::Malformed(_))));
    }

    #[test]
    fn garbled_or_mismatched_requests_are_refused() {
        assert!(matches!(accept::<Promote>(b"garbage"), Err(Refused::Malformed(_))));
        assert!(matches!(accept::<Promote>(&codec::encode(&7u16).unwrap()), Err(Refused::Malformed(_))));
        // A request for another operation sent to this route.
        let learner = request(FORWARD_VERSION, AddLearner { node_id: 4, addr: "10.0.0.4:8080".into() });
        assert!(matches!(accept::<Promote>(&learner), Err(Refused::Malformed(_))));
    }

    #[test]
    fn an_answer_to_another_operation_is_a_typed_error() {
        let addr = "10.0.0.2:8080";
        let right = ForwardAnswer { op: OpKind::ReadIndex, result: Ok(Some(9)) };
        assert_eq!(answer_for::<ReadIndex>(addr, right).unwrap(), Ok(Some(9)));
        // Same reply type, other operation: refused by name.
        let wrong = ForwardAnswer { op: OpKind::QuorumAge, result: Ok(Some(9)) };
        let e = answer_for::<ReadIndex>(addr, wrong).unwrap_err();
        assert!(matches!(e, ForwardError::WrongKind { asked: OpKind::ReadIndex, got: OpKind::QuorumAge, .. }), "{e}");
        assert!(e.is_bad_answer() && !e.surely_not_delivered());
        // The leader's refusal is the caller's answer, not a bad answer.
        let refusal = ForwardAnswer::<Option<u64>> {
            op: OpKind::ReadIndex,
            result: Err(ProposeError::NotLeader { leader: Some(3) }),
        };
        assert_eq!(answer_for::<ReadIndex>(addr, refusal).unwrap(), Err(ProposeError::NotLeader { leader: Some(3) }));
    }

    #[test]
    fn an_answer_of_another_shape_does_not_decode() {
        // What `PeerClient::call` decodes a peer's bytes as, for a membership change.
        let read_index =
            codec::encode(&ForwardAnswer { op: OpKind::ReadIndex, result: Ok::<_, ProposeError>(Some(3u64)) });
        let garbled = codec::encode(&"not an answer at all").unwrap();
        for bytes in [read_index.unwrap(), garbled, b"\x01garbage".to_vec()] {
            assert!(codec::decode::<ForwardAnswer<MembershipChange>>(&bytes).is_err());
        }
    }
}
