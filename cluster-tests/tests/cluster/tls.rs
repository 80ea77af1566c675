//! Mutual TLS across processes: a node whose certificate another CA signed can neither join
//! the cluster nor call any member's internal endpoints, while the members keep serving.
use std::time::Duration;

use leaf_api::types::AddLearnerRequest;
use leaf_cluster_tests::cluster::{free_port, node_client, tls_client_config, NodeSpec, SECRET, TOKEN};
use leaf_node::internals::ops::OpKind;
use leaf_node::internals::{
    CallError, PeerClient, PATH_APPEND, PATH_PEER_STATUS, PATH_PRE_VOTE, PATH_SNAPSHOT, PATH_TAKE_OVER, PATH_TIME,
    PATH_VOTE,
};

use crate::support::*;

/// `leaf certs ARGS...` with the test binary.
fn certs(args: &[&str]) {
    let out = std::process::Command::new(bin()).arg("certs").args(args).output().unwrap();
    assert!(out.status.success(), "leaf certs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn handshakes_refused(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("leaf_tls_handshake_failures_total ").and_then(|v| v.trim().parse().ok()))
        .expect("the TLS metrics")
}

/// Dials of the leader that node 4 must have refused before the test looks at what the leader
/// replicated to it.
const DIALS_REFUSED: f64 = 5.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_certificate_of_another_ca_cannot_join_or_call_internal_endpoints() {
    let (_lane, mut cluster, leader) = cluster_beside(3, "").await;
    let refused_before: f64 = {
        let mut sum = 0.0;
        for id in 1..=3 {
            sum += handshakes_refused(&cluster.client(id).metrics().await.unwrap());
        }
        sum
    };

    // Node 4 with a certificate for its own ID and address, from a CA of its own.
    let foreign = tempfile::tempdir().unwrap();
    let dir = foreign.path().to_str().unwrap();
    // The CA outlives the node certificate made a moment later (same --days would not, by the
    // seconds between the two commands, and `leaf certs` rightly refuses that).
    certs(&["ca", "--dir", dir, "--days", "31"]);
    certs(&["node", "--dir", dir, "--id", "4", "--host", "127.0.0.1", "--days", "30"]);
    let file = |name: &str| foreign.path().join(name).display().to_string();
    let port = free_port();
    let env = vec![
        ("LEAF_TLS__CERT".to_string(), file("node-4.pem")),
        ("LEAF_TLS__KEY".to_string(), file("node-4-key.pem")),
        ("LEAF_TLS__CA".to_string(), file("ca.pem")),
    ];
    cluster.add_node(NodeSpec { port, peer_addr: format!("127.0.0.1:{port}"), env, ..NodeSpec::direct(4) }).unwrap();

    // Added as a learner (the membership change commits among the members), it gets nothing:
    // the leader's dial fails verification against the cluster CA, over and over.
    let req = AddLearnerRequest { node_id: 4, addr: cluster.addr(4) };
    let added = tokio::time::timeout(Duration::from_secs(20), cluster.client(leader).add_learner(&req)).await;
    eprintln!("add-learner of the foreign node: {added:?}");
    // The leader keeps dialing it; node 4 refuses every handshake (its CA signed no member).
    let own = node_client(&cluster.url(4), Some(TOKEN), Some(&foreign.path().join("ca.pem")), Duration::from_secs(10));
    let refused = eventually("node 4 refuses the members' handshakes", FORM, || async {
        // Node 4 may still be starting on a loaded machine: not listening yet is no answer.
        let refused = own.metrics().await.map_or(0.0, |m| handshakes_refused(&m));
        if refused >= DIALS_REFUSED {
            Ok(refused)
        } else {
            Err(refused)
        }
    })
    .await;
    eprintln!("node 4 refused {refused} handshakes");
    let s = cluster.status(leader).await.unwrap();
    let to_4 = s.replication.iter().flatten().find(|r| r.node_id == 4);
    assert!(to_4.is_none_or(|r| r.matched_index.is_none()), "the leader replicated to node 4: {s:?}");
    let s = own.cluster_status().await.unwrap();
    assert_eq!((s.leader_id, s.last_applied_index, s.term), (None, None, 0), "node 4 learned something: {s:?}");
    assert!(s.members.is_empty(), "node 4 knows members: {s:?}");
    assert!(!s.health.segment_ready);

    // Its certificate opens no internal endpoint of any member, whatever the path.
    let mut paths =
        vec![PATH_APPEND, PATH_VOTE, PATH_SNAPSHOT, PATH_TIME, PATH_PEER_STATUS, PATH_PRE_VOTE, PATH_TAKE_OVER];
    paths.extend(OpKind::ALL.map(OpKind::path));
    let cluster_ca = cluster.ca().unwrap();
    let identity = (foreign.path().join("node-4.pem"), foreign.path().join("node-4-key.pem"));
    let forged = tls_client_config(&cluster_ca, Some((identity.0.as_path(), identity.1.as_path()))).unwrap();
    let peer = PeerClient::with_client_config(Some(SECRET), forged);
    for id in 1..=3 {
        for path in &paths {
            // No answer at all: the handshake is refused (once, in a CI run, a call got no
            // reply within its 5 s instead, so the client's timeout counts as no answer too).
            match peer.call::<_, serde_json::Value>(id, &cluster.addr(id), path, &(), Duration::from_secs(5)).await {
                Err(CallError::Transport { .. } | CallError::Unreachable { .. } | CallError::Timeout { .. }) => {}
                other => panic!("node {id} {path}: a foreign certificate got {other:?}"),
            }
        }
    }
    // Every one of those handshakes is counted as refused (one that timed out on the client
    // when the member's own handshake timeout ends it, hence the wait).
    eventually("the members count every refused handshake", FORM, || async {
        let mut refused_after = 0.0;
        for id in 1..=3 {
            refused_after += handshakes_refused(&cluster.client(id).metrics().await.unwrap());
        }
        if refused_after - refused_before >= (3 * paths.len()) as f64 {
            Ok(())
        } else {
            Err(format!("members counted {} refused handshakes", refused_after - refused_before))
        }
    })
    .await;

    // The members still agree and serve.
    assert_eq!(cluster.wait_leader_among(&[1, 2, 3], FORM).await.unwrap(), leader);
    create_tag(&cluster.client(2), "after-foreign", 10).await;
    assert_eq!(try_get_ids(&cluster.client(3), "after-foreign", Some(5)).await.unwrap().len(), 5);
}

/// A member's certificate proves which member it is: a Raft message claiming another node is
/// refused (before, any member could vote or append in another's name), and a node removed
/// from the cluster is refused although the static peer list still names it (before, the list
/// let it in for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_speaks_only_for_its_own_current_member() {
    use openraft::raft::VoteRequest;
    use openraft::Vote;
    let (_lane, mut cluster, leader) = cluster_beside(3, "").await;
    let [a, b] = [1, 2, 3].into_iter().filter(|id| *id != leader).collect::<Vec<_>>()[..] else { unreachable!() };
    let as_a = PeerClient::with_client_config(Some(SECRET), cluster.peer_tls_config(a).unwrap().unwrap());
    let as_b = PeerClient::with_client_config(Some(SECRET), cluster.peer_tls_config(b).unwrap().unwrap());
    let refused = |r: Result<serde_json::Value, CallError>| matches!(r, Err(CallError::Refused { status: 403, .. }));

    // Node a's certificate asks the leader for its vote as candidate b, in a far term that
    // would depose the leader if it were heard.
    let term = cluster.status(leader).await.unwrap().term;
    let forged: VoteRequest<u64> = VoteRequest::new(Vote::new(term + 100, b), None);
    let r = as_a.call(leader, &cluster.addr(leader), PATH_VOTE, &forged, Duration::from_secs(5)).await;
    assert!(refused(r.clone()), "a vote in another node's name got {r:?}");
    assert_eq!(cluster.status(leader).await.unwrap().term, term, "the forged vote moved the term");

    // Node b is removed; its certificate no longer opens the members' internal endpoints.
    cluster.client(leader).remove(b).await.unwrap();
    cluster.kill(b);
    eventually(&format!("node {a} refuses removed node {b}"), FORM, || async {
        let r = as_b.call(a, &cluster.addr(a), PATH_TIME, &(), Duration::from_secs(5)).await;
        if refused(r.clone()) {
            Ok(())
        } else {
            Err(r)
        }
    })
    .await;
    // The remaining members still serve.
    create_tag(&cluster.client(a), "after-removal", 10).await;
    assert_eq!(try_get_ids(&cluster.client(leader), "after-removal", Some(5)).await.unwrap().len(), 5);
}

/// A node dials the member it means: the certificate that answers must speak for that member.
/// Before, any member's certificate answered for every address, so a learner registered at
/// another member's address was "replicated to" by that member, which took the leader's
/// appends for its own (counting one node twice is how a quorum is faked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialled_peer_must_be_the_member_it_is_meant_to_be() {
    let (_lane, cluster, leader) = cluster_beside(3, "").await;
    let other = [1, 2, 3].into_iter().find(|id| *id != leader).unwrap();
    let impostor_addr = cluster.peer_addr(other).unwrap();
    let admin = cluster.client(leader);
    let before = handshakes_refused(&cluster.client(other).metrics().await.unwrap());
    admin.add_learner(&AddLearnerRequest { node_id: 9, addr: impostor_addr }).await.unwrap();

    // The leader dials "node 9" and finds node `other`'s certificate: it refuses the
    // handshake, again and again, and `other` counts each refusal.
    eventually("the leader's dials of node 9 are refused", FORM, || async {
        let refused = handshakes_refused(&cluster.client(other).metrics().await.unwrap()) - before;
        if refused >= DIALS_REFUSED {
            Ok(())
        } else {
            Err(refused)
        }
    })
    .await;
    let status = cluster.status(leader).await.unwrap();
    let replication = status.replication.expect("the leader reports replication");
    let nine = replication.iter().find(|r| r.node_id == 9).expect("node 9 is a member");
    assert_eq!(nine.matched_index, None, "node {other} took node 9's appends: {replication:?}");
    // The real members are unaffected.
    create_tag(&cluster.client(other), "after-impostor", 10).await;
    assert_eq!(try_get_ids(&cluster.client(leader), "after-impostor", Some(5)).await.unwrap().len(), 5);
}
