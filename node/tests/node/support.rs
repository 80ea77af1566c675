//! What the node tests share: a node in-process ([`start`]), a one-attempt client, and a `leaf`
//! process on a free port ([`spawn_leaf`]); the calls every suite makes, and the way a test
//! waits, come from `leaf-test-support`.
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use leaf_api::types::{ClockFault, Health};
use leaf_api::ErrorBody;
use leaf_client::{Client, HealthMode, StatusCode};
use leaf_node::config::Config;
use leaf_node::NodeHandle;
use tempfile::TempDir;

pub use leaf_test_support::{
    create_bounded_tag, create_tag, error_of, eventually, get_ids, tag_req, until, wait_snowflake,
};

pub const TOKEN: &str = "test-admin-token-0123456789";

pub fn config(dir: &TempDir) -> Config {
    Config { data_dir: dir.path().to_path_buf(), http_addr: "127.0.0.1:0".parse().unwrap(), ..Config::default() }
}

pub async fn start(cfg: Config) -> (NodeHandle, Client) {
    let token = cfg.admin_token().map(str::to_string);
    let node = leaf_node::start(cfg).await.expect("node starts");
    assert!(node.wait_ready(Duration::from_secs(10)).await, "node not ready");
    // Its own leader, it raises the cluster's version in the background: wait for that
    // entry, so that it is not in a test's count of entries.
    let supported = leaf_raft_store::version::SUPPORTED;
    let raised = || async { node.raft().state().cluster_version() >= supported };
    until("the node raises the cluster version", Duration::from_secs(10), raised).await;
    let client = client(&format!("http://{}", node.http_addr()), token);
    (node, client)
}

/// The settlement key of the tests' clients without a token: one caller of gapless series
/// across clients and restarts.
pub const SETTLEMENT_KEY: [u8; 32] = [7; 32];

/// A client of one node: one attempt per call, so every answer is that node's.
pub fn client(url: &str, token: Option<String>) -> Client {
    let timeout = Duration::from_secs(30);
    Client::builder([url])
        .maybe_token(token)
        .retries(0)
        .timeout(timeout)
        .deadline(timeout)
        .settlement_key(SETTLEMENT_KEY)
        .build()
        .unwrap()
}

pub async fn snowflake_ids(c: &Client, count: Option<u32>) -> Vec<i64> {
    let ids = match count {
        Some(n) => c.snowflake_ids("audit-key", n).await,
        None => c.snowflake_id("audit-key").await.map(|id| vec![id]),
    };
    ids.unwrap_or_else(|e| panic!("snowflake ({count:?}): {e}"))
}

pub async fn health(c: &Client) -> Health {
    c.health(HealthMode::All).await.unwrap().health
}

pub fn spawn_leaf(dir: &TempDir, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_leaf"))
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args(["--http-addr", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn leaf")
}

pub async fn raw_post(addr: SocketAddr, path: &str, body: &'static str) -> (StatusCode, ErrorBody) {
    use http_body_util::{BodyExt, Full};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::post(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&b).unwrap())
}

pub fn fault_config(dir: &TempDir) -> Config {
    let mut cfg = config(dir);
    cfg.fault.enabled = true;
    cfg
}

pub async fn set_clock_offset(c: &Client, offset_ms: i64) {
    let now = c.set_clock_fault(&ClockFault { offset_ms }).await.unwrap();
    assert_eq!(now.offset_ms, offset_ms);
}

pub fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

pub use leaf_cluster_tests::cluster::free_port;
