//! Who is calling an admin or internal operation, for every edge: the verdict on a call that
//! came in on a connection ([`ConnInfo`]) with its credentials, over the checks of
//! [`crate::access::credentials`]. ID requests are checked by [`App::check_ids`].
use leaf_api::audit::Actor;
use leaf_api::identity::CertIdentity;

use super::{ApiError, App};
use crate::access::credentials::{
    admin_client, check_admin, check_cluster_secret, check_origin, check_peer_node, ConnInfo, PeerNode, Provenance,
};
use crate::access::Principal;
use leaf_api::routes::{self, Access};
use leaf_api::tokens::Right;

/// The credentials a call carries, whatever its wire form.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// The `Authorization` header or gRPC metadata (`Bearer <token>`).
    pub authorization: Option<&'a str>,
    /// The cluster secret header of an internal call.
    pub cluster_secret: Option<&'a [u8]>,
    /// Where a browser's request comes from (HTTP only; gRPC has no browser callers).
    pub provenance: Provenance<'a>,
}

impl App {
    /// The admin credentials of a call that came in on `conn` (HTTP `/admin/*`, gRPC
    /// `AdminService`): a client certificate named in `tls.admin_clients`, a scoped token
    /// (within its quota), else the admin token (or loopback without one, for a request
    /// addressed to a loopback name). A sent bearer that is none of these is refused, even
    /// where no credential was needed.
    pub fn authorize_admin(&self, conn: &ConnInfo, creds: Credentials<'_>) -> Result<Principal, ApiError> {
        if let Some(CertIdentity::Client(name)) = conn.identity.as_deref() {
            if admin_client(&self.config.tls.admin_clients, conn.identity.as_deref()) {
                return Ok(Principal::Root(Actor::client_cert(name)));
            }
        }
        if let Some(bearer) = creds.authorization.and_then(|v| v.strip_prefix("Bearer ")) {
            if let Some(p) = self.access.scoped(bearer)? {
                return Ok(p);
            }
        }
        check_admin(self.config.admin_token(), creds.authorization, conn, creds.provenance.host).map(Principal::Root)
    }

    /// Admin and monitor routes need the credentials their row of [`routes::TABLE`] declares
    /// (an admin path no row declares needs the root credentials), internal ones the cluster
    /// secret: the verdict on a request for `method` at `path` that came in on `conn`, before
    /// routing. With TLS, an internal call needs a certificate the cluster CA signed for a
    /// current member node (or any node while this one has no cluster yet: a new learner
    /// waits for its leader), and always the cluster secret. A node removed from the cluster
    /// is refused even if the static peer list still names it.
    pub fn authorize(
        &self,
        conn: &ConnInfo,
        method: Option<routes::Method>,
        path: &str,
        creds: Credentials<'_>,
    ) -> Result<Verdict, ApiError> {
        match routes::access(method, path) {
            Some(Access::Right(right)) => {
                check_origin(creds.provenance)?;
                let principal = self.authorize_admin(conn, creds)?;
                principal.require(right)?;
                Ok(Verdict::Admin(principal))
            }
            Some(Access::Root(what)) => {
                check_origin(creds.provenance)?;
                let principal = self.authorize_admin(conn, creds)?;
                principal.require_root(what)?;
                Ok(Verdict::Admin(principal))
            }
            Some(Access::Monitor(view)) => {
                // Public: anyone; a credential that is sent must be a valid one, and then the
                // view is the credential's (a scoped token sees its own tags).
                if self.config.auth.is_public(view) {
                    return match creds.authorization {
                        Some(_) => Ok(Verdict::Monitor(self.authorize_admin(conn, creds)?)),
                        None => Ok(Verdict::Anyone),
                    };
                }
                check_origin(creds.provenance)?;
                let principal = self.authorize_admin(conn, creds)?;
                principal.require(Right::Monitor)?;
                Ok(Verdict::Monitor(principal))
            }
            // The handlers check what these need: it depends on the tag and the count.
            Some(Access::Anyone | Access::Ids | Access::Gapless) => Ok(Verdict::Anyone),
            None if path == crate::raft::learner_proof::PATH_LEARNER_PROOF && self.tls.is_none() => {
                // A node proving it holds the secret to a leader that has not sent it.
                Ok(Verdict::Peer(None))
            }
            None if crate::raft::service::is_internal(path) => {
                let peer = match self.tls {
                    Some(_) => Some(check_peer_node(conn.identity.as_deref(), |id| self.is_current_member(id))?),
                    None => None,
                };
                check_cluster_secret(self.config.cluster_secret(), creds.cluster_secret)?;
                Ok(Verdict::Peer(peer))
            }
            None => Ok(Verdict::Anyone),
        }
    }
}

impl App {
    /// Whether node `id` may speak to this node as a peer: a member of this node's membership,
    /// or any node (signed by the cluster CA, with the cluster secret) while this node is not a
    /// member of it itself. That is a new learner waiting for its leader, or catching up: it
    /// gets the log 32 entries at a time, and the membership it has applied so far may predate
    /// its leader, which joined later (it would refuse that leader for good otherwise).
    pub fn is_current_member(&self, id: u64) -> bool {
        !self.raft.has_membership() || !self.raft.knows_node(self.raft.node_id()) || self.raft.knows_node(id)
    }
}

/// What a request's credentials proved, for the edge to hand on to the handler.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// An admin request and who made it.
    Admin(Principal),
    /// A monitor endpoint that is not public, and who reads it (what it sees follows).
    Monitor(Principal),
    /// An internal call, and the member whose certificate made it (with TLS).
    Peer(Option<PeerNode>),
    /// Anything else: the ID and monitor routes check what they need themselves.
    Anyone,
}
