//! A cluster of mixed versions without an older build: node 3 advertises cluster version 1
//! (`LEAF_ADVERTISE_CLUSTER_VERSION=1`), as a member of a release before cluster versions
//! answers. The cluster stays at version 1: a feature of version 2 (a series' limits) is
//! refused with `feature_not_active` on every node, and gapless numbers are still issued, in
//! the form of version 1. Node 3 restarted without the override: the leader raises the
//! cluster's version, every node applies it, and the feature works. A new node that advertises
//! version 1 is then refused when it is added, by name; started as what it is, it joins.

use leaf_api::gapless::GaplessOptions;
use leaf_api::profile::Profile;
use leaf_api::types::{AddLearnerRequest, CreateTagRequest, UpdateTagRequest};
use leaf_api::ErrorCode;
use leaf_cluster_tests::cluster::{Cluster, NodeSpec, Options};

use crate::support::*;

async fn versions(cluster: &Cluster, id: u64) -> Option<(u32, u32)> {
    let s = cluster.status(id).await.ok()?;
    s.version.map(|v| (v.active, v.supported))
}

/// Waits until node `id` answers its status (it listens).
async fn answers(cluster: &Cluster, id: u64) {
    eventually(&format!("node {id} answers"), FORM, || cluster.status(id)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_activates_a_version_only_once_its_oldest_member_supports_it() {
    let _lane = beside().await;
    let mut opts = Options::new(bin());
    opts.extra_toml = "[auth]\nanonymous_gapless = true\n".into();
    let mut cluster = Cluster::prepare_specs((1..=3).map(NodeSpec::direct).collect(), opts).unwrap();
    cluster.set_env(3, &[("LEAF_ADVERTISE_CLUSTER_VERSION", "1")]);
    for id in 1..=3 {
        cluster.spawn(id).unwrap();
    }
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let gapless = GaplessOptions::default();
    let req = CreateTagRequest { profile: Some(Profile::Gapless), gapless: Some(gapless), ..tag_req("inv", 1) };
    cluster.client(leader).create_tag(&req).await.unwrap();
    // The leader has heard every member, node 3 at version 1, and keeps the cluster there.
    let s = eventually("the leader hears every member", FORM, || async {
        let s = cluster.status(leader).await.unwrap();
        let seen: Vec<Option<u32>> = s.members.iter().map(|m| m.supports_version).collect();
        if seen.iter().all(Option::is_some) {
            Ok(s)
        } else {
            Err(seen)
        }
    })
    .await;
    assert_eq!(s.members.iter().find(|m| m.node_id == 3).and_then(|m| m.supports_version), Some(1));
    let limits = UpdateTagRequest { max_numbers: Some(10), ..Default::default() };
    for id in 1..=3 {
        assert_eq!(versions(&cluster, id).await.map(|v| v.0), Some(1), "node {id} runs version 1");
        let e = cluster.client(id).update_tag("inv", &limits).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::FeatureNotActive), "node {id}: {e}");
        assert!(e.to_string().contains("needs cluster version 2"), "{e}");
        // Numbers are issued all the same, as version 1 issues them.
        let n = cluster.client(id).gapless("inv").issue(&format!("k-{id}")).await.unwrap();
        assert_eq!(n.number, id);
    }

    // Node 3 comes back as what it is: the cluster moves to the newest version, this build's.
    assert!(cluster.stop(3));
    cluster.set_env(3, &[]);
    cluster.spawn(3).unwrap();
    let newest = leaf_raft_store::version::SUPPORTED.0;
    for id in 1..=3 {
        let applied = || async { versions(&cluster, id).await == Some((newest, newest)) };
        until(&format!("node {id} applies version {newest}"), FORM, applied).await;
    }
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let info = cluster.client(leader).update_tag("inv", &limits).await.unwrap();
    assert_eq!(info.gapless.and_then(|g| g.max_numbers), Some(10));
    let n = cluster.client(3).gapless("inv").issue("k-4").await.unwrap();
    assert_eq!(n.number, 4, "the series goes on where version 1 left it");

    // A node that could not apply the log is refused when it joins.
    let mut spec = NodeSpec::direct(4);
    spec.env = vec![("LEAF_ADVERTISE_CLUSTER_VERSION".into(), "1".into())];
    let port = spec.port;
    cluster.add_node(spec).unwrap();
    let add = AddLearnerRequest { node_id: 4, addr: format!("127.0.0.1:{port}") };
    answers(&cluster, 4).await;
    let refused = cluster.client(leader).add_learner(&add).await.unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::MembershipConflict), "{refused}");
    assert!(refused.to_string().contains("supports cluster versions up to 1"), "{refused}");
    assert!(cluster.stop(4));
    cluster.set_env(4, &[]);
    cluster.spawn(4).unwrap();
    answers(&cluster, 4).await;
    let change = cluster.client(leader).add_learner(&add).await.unwrap();
    assert_eq!(change.learners, vec![4]);
}
