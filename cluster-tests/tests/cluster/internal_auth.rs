//! The internal endpoints (Raft and forwarded operations) accept only members: no secret or a
//! wrong one is 401 before anything reaches Raft, a malformed body with the right secret is
//! 400, a forwarded request of a newer protocol version is refused, and only POST is served.
use leaf_client::{Method, StatusCode};
use leaf_cluster_tests::cluster::{Cluster, SECRET};
use leaf_node::internals::ops::{ForwardRequest, OpKind, Remove, FORWARD_VERSION};
use leaf_node::internals::{PATH_PRE_VOTE, PATH_TAKE_OVER};

use crate::support::*;

/// POSTs `body` to an internal endpoint of `url` as node `as_node` would (with its certificate
/// when the cluster has TLS), with `secret` in the secret header.
async fn post_internal(
    cluster: &Cluster,
    as_node: u64,
    url: &str,
    path: &str,
    secret: Option<&str>,
    body: impl Into<bytes::Bytes>,
) -> StatusCode {
    use http_body_util::Full;
    use hyper_util::client::legacy::Client as H;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let config = cluster.peer_tls_config(as_node).unwrap().expect("the test clusters run with TLS");
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*config).clone())
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let client: H<_, Full<bytes::Bytes>> = H::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let mut req = hyper::Request::post(format!("{url}{path}"));
    if let Some(s) = secret {
        req = req.header("x-leaf-cluster-secret", s);
    }
    let resp = client.request(req.body(Full::new(body.into())).unwrap()).await.unwrap();
    resp.status()
}

/// The checks, on a running cluster with its `leader` and a `follower`: neither the term nor
/// the leader may move while they run.
pub(crate) async fn refuses_unauthenticated_and_malformed_calls(cluster: &Cluster, leader: u64, follower: u64) {
    let term = cluster.status(follower).await.unwrap().term;
    // Internal endpoints: no secret or a wrong one is 401 before anything reaches Raft; a
    // malformed body with the right secret is 400; only POST.
    let url = cluster.url(follower);
    let forward_paths = OpKind::ALL.map(OpKind::path);
    for path in
        ["/internal/raft/vote", "/internal/raft/append", "/internal/raft/snapshot", PATH_PRE_VOTE, PATH_TAKE_OVER]
            .into_iter()
            .chain(forward_paths)
    {
        for secret in [None, Some("wrong-secret-0123456789abcd"), Some(&SECRET[..SECRET.len() - 1])] {
            assert_eq!(
                post_internal(cluster, leader, &url, path, secret, &b"x"[..]).await,
                StatusCode::UNAUTHORIZED,
                "{path}"
            );
        }
        assert_eq!(
            post_internal(cluster, leader, &url, path, Some(SECRET), &b"\x01garbage"[..]).await,
            StatusCode::BAD_REQUEST
        );
        // A well-formed envelope (version, checksum) around the wrong payload.
        let wrong = leaf_api::codec::encode(&vec![u64::MAX; 3]).unwrap();
        assert_eq!(
            post_internal(cluster, leader, &url, path, Some(SECRET), wrong).await,
            StatusCode::BAD_REQUEST,
            "{path}"
        );
    }
    assert_eq!(
        post_internal(cluster, leader, &url, "/internal/nope", Some(SECRET), &b""[..]).await,
        StatusCode::NOT_FOUND
    );
    // A forwarded request of a version this release does not speak is refused, not executed.
    let newer = ForwardRequest { version: FORWARD_VERSION + 1, budget_ms: 1000, op: Remove { node_id: follower } };
    let newer = leaf_api::codec::encode(&newer).unwrap();
    let path = OpKind::Remove.path();
    assert_eq!(
        post_internal(cluster, follower, &cluster.url(leader), path, Some(SECRET), newer).await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(cluster.status(leader).await.unwrap().members.len(), 3);
    let (s, _) = error_of(&cluster.client(follower), Method::GET, "/internal/raft/vote", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "GET without the secret");
    // Neither the term nor the leader moved: nothing the refused requests carried reached Raft.
    let s = cluster.status(follower).await.unwrap();
    assert_eq!((s.term, s.leader_id), (term, Some(leader)));
}
