//! The commands that talk to one node's HTTP API through `leaf-client` (`tag`, `get`,
//! `health`, `cluster`; `token` and `audit` in [`super::tokens`]): their arguments, one attempt
//! per command as a script expects, the answer printed as the node sent it, and the exit codes
//! (0 done, 1 unavailable, 2 refused or misused).
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use leaf_api::types::{AddLearnerRequest, CreateTagRequest, CreateTagsRequest, ListQuery, UpdateTagRequest};
use leaf_client::{Client, ClientError, HealthMode, TlsOptions};
use serde::Serialize;

use super::{import, tokens, Command};

#[derive(Subcommand, Debug)]
pub enum ClusterCmd {
    /// Membership, leader, term, log indexes and replication as the node sees them.
    Status,
    /// Add a node as a learner: it replicates the log and serves IDs but does not vote. Start
    /// it first with the same cluster_secret and a node ID never used before.
    AddLearner {
        node_id: u64,
        /// `host:port` where the other nodes reach the new node.
        addr: String,
    },
    /// Make a caught-up learner a voter.
    Promote { node_id: u64 },
    /// Remove a voter or learner; its ID is never reused.
    Remove { node_id: u64 },
}

#[derive(Args, Debug)]
pub struct ConnArgs {
    /// Base URL of a node: http://host:port, or https://host:port for a node with TLS on.
    #[arg(long, visible_alias = "node", global = true, env = "LEAF_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Bearer token: the admin token, or a scoped token (`leaf_<id>_<secret>`).
    #[arg(long, global = true, env = "LEAF_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM file of the CA that signed the node's certificate, for https:// URLs (default: the
    /// platform's root certificates).
    #[arg(long, global = true, env = "LEAF_CA")]
    pub ca: Option<PathBuf>,
    /// PEM certificate to present to a node that asks for one (mutual TLS; with --client-key).
    #[arg(long, global = true, env = "LEAF_CLIENT_CERT")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, global = true, env = "LEAF_CLIENT_KEY")]
    pub client_key: Option<PathBuf>,
}

/// The settings of a tag: `leaf tag create`'s and `leaf template put`'s.
#[derive(clap::Args, Debug)]
pub struct TagSettings {
    /// Stored step (segment size and floor of the dynamic step).
    #[arg(long)]
    step: i64,
    /// First ID to hand out (default 1).
    #[arg(long)]
    max_id: Option<i64>,
    #[arg(long)]
    description: Option<String>,
    /// How the IDs are made: segment (default), monotonic (strictly increasing, served by
    /// the leader), obfuscated (not ordered, not countable), daily (yyyyMMdd + counter) or
    /// gapless (numbers 1, 2, 3, ... one per key, for invoices).
    #[arg(long)]
    profile: Option<leaf_api::profile::Profile>,
    /// Daily tags: counter digits after the date (default 8).
    #[arg(long, requires = "profile")]
    digits: Option<u8>,
    /// Daily and gapless tags: the zone whose midnight starts a day (a gapless series' period),
    /// as +HH:MM / -HH:MM (default +00:00).
    #[arg(long, requires = "profile", allow_hyphen_values = true)]
    utc_offset: Option<String>,
    /// Gapless tags: when the series restarts at 1: never (default), day, month or year.
    #[arg(long, requires = "profile")]
    reset: Option<leaf_api::gapless::Reset>,
    /// Gapless tags: how a number is displayed, e.g. 'INV-{yyyy}-{seq:06}'.
    #[arg(long, requires = "profile")]
    format: Option<String>,
    /// Gapless tags: what a period's close does to its open reservations: wait (default) or
    /// void.
    #[arg(long, requires = "profile")]
    on_period_close: Option<leaf_api::gapless::PeriodClose>,
    /// Gapless tags that reset: how many periods the ledger keeps (default: all).
    #[arg(long, requires = "profile")]
    retain_periods: Option<u32>,
    /// Gapless tags: most numbers the series keeps (default 100000).
    #[arg(long, requires = "profile")]
    max_numbers: Option<u64>,
    /// Gapless tags: most new numbers one caller takes a second from the series on one node
    /// (default 100).
    #[arg(long, requires = "profile")]
    issues_per_sec: Option<u32>,
    /// The largest ID the tag may hand out, e.g. 9007199254740991 for JavaScript.
    #[arg(long)]
    upper_bound: Option<i64>,
}

impl TagSettings {
    /// The creation request of `tag` with these settings.
    pub fn request(self, tag: String) -> CreateTagRequest {
        let TagSettings {
            step,
            max_id,
            description,
            profile,
            digits,
            utc_offset,
            reset,
            format,
            on_period_close,
            retain_periods,
            max_numbers,
            issues_per_sec,
            upper_bound,
        } = self;
        let gapless_profile = profile == Some(leaf_api::profile::Profile::Gapless);
        let any = reset.is_some()
            || utc_offset.is_some()
            || format.is_some()
            || on_period_close.is_some()
            || retain_periods.is_some()
            || max_numbers.is_some()
            || issues_per_sec.is_some();
        let gapless = (gapless_profile && any).then(|| leaf_api::gapless::GaplessOptions {
            reset,
            utc_offset: utc_offset.clone(),
            format,
            on_period_close,
            retain_periods,
            max_numbers,
            issues_per_sec,
        });
        let daily = (!gapless_profile && (digits.is_some() || utc_offset.is_some()))
            .then_some(leaf_api::profile::DailyOptions { digits, utc_offset });
        CreateTagRequest { tag, step, max_id, description, profile, daily, gapless, upper_bound }
    }
}

#[derive(Subcommand, Debug)]
pub enum TagCmd {
    /// Create a tag.
    Create {
        tag: String,
        #[command(flatten)]
        settings: TagSettings,
    },
    /// Create many tags: FILE holds one JSON object per line, as `POST /admin/tags` takes it
    /// (`-` reads standard input). Sent 10,000 to a request, several requests in flight (so
    /// the cluster commits one while it receives the next); tags that exist are counted, not
    /// changed, so the same file may be sent again. Prints how many were created and existed.
    CreateBatch {
        file: PathBuf,
        /// Requests in flight at once (1 sends them one after another, in the file's order).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        in_flight: u16,
    },
    /// List the tags (all of them, or those starting with --prefix), as one JSON array,
    /// fetched a page at a time.
    List {
        /// Only tags that start with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only tags after this one in name order.
        #[arg(long)]
        after: Option<String>,
    },
    /// Show one tag.
    Show { tag: String },
    /// An obfuscated tag's ID back to its sequence number.
    Decode { tag: String, id: i64 },
    /// Change a tag's step and/or description, or a gapless series' limits.
    Update {
        tag: String,
        #[arg(long)]
        step: Option<i64>,
        #[arg(long)]
        description: Option<String>,
        /// Gapless tags: most numbers the series keeps.
        #[arg(long)]
        max_numbers: Option<u64>,
        /// Gapless tags: most new numbers one caller takes a second from the series on one node.
        #[arg(long)]
        issues_per_sec: Option<u32>,
    },
    /// Archive a tag: no node serves it any more and its name is never reused.
    Archive { tag: String },
    /// Bring an archived tag back, its counter where it stopped.
    Restore { tag: String },
}

#[derive(Subcommand, Debug)]
pub enum GetCmd {
    /// Segment-mode IDs for a tag.
    Segment {
        tag: String,
        /// How many IDs (1–100,000 one per line; 1–1,000,000 with --ranges).
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Print the IDs as JSON ranges `[start, end)` instead of one per line.
        #[arg(long)]
        ranges: bool,
    },
    /// Snowflake IDs (the key is only for auditing).
    Snowflake {
        #[arg(default_value = "leaf-snowflake")]
        key: String,
        /// How many IDs (1–100,000 one per line; 1–1,000,000 with --ranges).
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Print the IDs as JSON ranges `[start, end)` instead of one per line.
        #[arg(long)]
        ranges: bool,
    },
    /// Decode a snowflake ID: timestamp, worker ID, sequence.
    Decode { id: i64 },
    /// The number of gapless series TAG for KEY (the caller's document reference): the next
    /// one, or the one KEY has. Prints it as JSON.
    Number { tag: String, key: String },
}

/// `leaf health`: exit 0 only on a ready answer from `/health` within 3 s.
async fn health(conn: ConnArgs, quiet: bool) -> ExitCode {
    let client = match connect(conn, Duration::from_secs(3)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.health(HealthMode::All).await {
        Ok(report) => {
            let text = serde_json::to_string(&report.health).unwrap_or_default();
            if !report.ready {
                eprintln!("not ready: HTTP 503: {text}");
                ExitCode::from(1)
            } else {
                if !quiet {
                    println!("{text}");
                }
                ExitCode::SUCCESS
            }
        }
        Err(e) if e.status().is_some() => {
            eprintln!("not ready: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("unreachable: {e}");
            ExitCode::from(1)
        }
    }
}

/// A client of the one node `conn` names: one attempt per command (as a script expects), the
/// answer printed as the node sent it.
pub fn connect(conn: ConnArgs, timeout: Duration) -> Result<Client, ExitCode> {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let tls = TlsOptions::from_files(conn.ca.as_deref(), conn.client_cert.as_deref(), conn.client_key.as_deref())
        .map_err(|e| usage(&e))?;
    Client::builder([conn.url])
        .maybe_token(conn.token)
        .tls(tls)
        .timeout(timeout)
        .deadline(timeout)
        .retries(0)
        .build()
        .map_err(|e| usage(&e))
}

/// Prints a typed answer as JSON (what the node sent) or the error; the exit code is 0, 1
/// when the node is unavailable, 2 when the request was refused.
pub fn print_json<T: Serialize>(result: Result<T, ClientError>) -> ExitCode {
    match result.and_then(|v| serde_json::to_string(&v).map_err(|e| ClientError::Request(e.to_string()))) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn print_ids(result: Result<Vec<i64>, ClientError>) -> ExitCode {
    match result {
        Ok(ids) => {
            let mut out = String::with_capacity(ids.len() * 20);
            for id in ids {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(itoa::Buffer::new().format(id));
            }
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

pub fn fail(e: &ClientError) -> ExitCode {
    eprintln!("error: {e}");
    if e.is_unavailable() {
        ExitCode::from(1)
    } else {
        ExitCode::from(2)
    }
}

pub(super) async fn client_command(cmd: Command) -> ExitCode {
    const TIMEOUT: Duration = Duration::from_secs(30);
    match cmd {
        Command::Serve(_)
        | Command::Bench(_)
        | Command::Certs { .. }
        | Command::Backup(_)
        | Command::Restore(_)
        | Command::Ledger { .. } => ExitCode::FAILURE,
        Command::Health { conn, quiet } => health(conn, quiet).await,
        Command::Token { cmd, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => tokens::token(&client, cmd).await,
            Err(code) => code,
        },
        Command::Template { cmd, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => super::templates::template(&client, cmd).await,
            Err(code) => code,
        },
        Command::Region { cmd, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => super::regions::region(&client, cmd).await,
            Err(code) => code,
        },
        Command::Import { cmd } => match connect(cmd.conn(), TIMEOUT) {
            Ok(client) => import::run(&client, cmd).await,
            Err(code) => code,
        },
        Command::Number { cmd, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => super::number::number(&client, cmd).await,
            Err(code) => code,
        },
        Command::Audit { args, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => tokens::audit(&client, args).await,
            Err(code) => code,
        },
        Command::Get { cmd, conn } => {
            let client = match connect(conn, TIMEOUT) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match cmd {
                GetCmd::Segment { tag, count, ranges: true } => print_json(client.segment_ranges(&tag, count).await),
                GetCmd::Segment { tag, count: 1, .. } => print_ids(client.segment_id(&tag).await.map(|id| vec![id])),
                GetCmd::Segment { tag, count, .. } => print_ids(client.segment_ids(&tag, count).await),
                GetCmd::Snowflake { key, count, ranges: true } => {
                    print_json(client.snowflake_ranges(&key, count).await)
                }
                GetCmd::Snowflake { key, count: 1, .. } => {
                    print_ids(client.snowflake_id(&key).await.map(|id| vec![id]))
                }
                GetCmd::Snowflake { key, count, .. } => print_ids(client.snowflake_ids(&key, count).await),
                GetCmd::Decode { id } => print_json(client.decode(id).await),
                GetCmd::Number { tag, key } => print_json(client.gapless(&tag).issue(&key).await),
            }
        }
        Command::Cluster { cmd, conn } => {
            let client = match connect(conn, TIMEOUT) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match cmd {
                ClusterCmd::Status => print_json(client.cluster_status().await),
                ClusterCmd::AddLearner { node_id, addr } => {
                    print_json(client.add_learner(&AddLearnerRequest { node_id, addr }).await)
                }
                ClusterCmd::Promote { node_id } => print_json(client.promote(node_id).await),
                ClusterCmd::Remove { node_id } => print_json(client.remove(node_id).await),
            }
        }
        Command::Tag { cmd, conn } => {
            let client = match connect(conn, TIMEOUT) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match cmd {
                TagCmd::Create { tag, settings } => print_json(client.create_tag(&settings.request(tag)).await),
                TagCmd::CreateBatch { file, in_flight } => {
                    print_json(create_batch(&client, &file, usize::from(in_flight)).await)
                }
                TagCmd::List { prefix, after } => {
                    print_json(client.tags_matching(&ListQuery { prefix, after, limit: None }).await)
                }
                TagCmd::Show { tag } => print_json(client.tag(&tag).await),
                TagCmd::Archive { tag } => print_json(client.archive_tag(&tag).await),
                TagCmd::Restore { tag } => print_json(client.restore_tag(&tag).await),
                TagCmd::Decode { tag, id } => print_json(client.decode_obfuscated(&tag, id).await),
                TagCmd::Update { tag, step, description, max_numbers, issues_per_sec } => {
                    let req = UpdateTagRequest { step, description, max_numbers, issues_per_sec };
                    print_json(client.update_tag(&tag, &req).await)
                }
            }
        }
    }
}

/// What `leaf tag create-batch` did.
#[derive(Debug, Default, Serialize)]
struct BatchSummary {
    created: usize,
    existing: usize,
}

/// Sends the tags of `file` (JSON lines; `-` for standard input) in requests of
/// [`leaf_api::tag::MAX_TAGS_PER_REQUEST`], `in_flight` of them at once. The file is read as
/// the requests go, so memory holds `in_flight + 1` requests, whatever the file's size. On the
/// first failure it stops and says so; the requests in flight then may or may not have
/// committed, and sending the file again creates whatever is missing.
async fn create_batch(client: &Client, file: &std::path::Path, in_flight: usize) -> Result<BatchSummary, ClientError> {
    use std::io::BufRead;

    use futures::TryStreamExt;
    let bad = |m: String| ClientError::Request(m);
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file).map_err(|e| bad(format!("{}: {e}", file.display())))?;
        Box::new(std::io::BufReader::new(f))
    };
    let requests = JsonLineBatches { lines: reader.lines().enumerate(), file, done: false };
    futures::stream::iter(requests)
        .map_ok(|tags| async move { client.create_tags(&CreateTagsRequest { tags }).await })
        .try_buffer_unordered(in_flight.max(1))
        .try_fold(BatchSummary::default(), |mut done, r| async move {
            done.created += r.created.len();
            done.existing += r.existing.len();
            Ok(done)
        })
        .await
}

/// The tags of a JSON-lines file, a request's worth ([`leaf_api::tag::MAX_TAGS_PER_REQUEST`])
/// at a time; a line that does not parse ends it with the error.
struct JsonLineBatches<'a, L> {
    lines: L,
    file: &'a std::path::Path,
    done: bool,
}

impl<L: Iterator<Item = (usize, std::io::Result<String>)>> Iterator for JsonLineBatches<'_, L> {
    type Item = Result<Vec<CreateTagRequest>, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut tags = Vec::new();
        while tags.len() < leaf_api::tag::MAX_TAGS_PER_REQUEST {
            let Some((i, line)) = self.lines.next() else { break };
            let parsed = line.map_err(|e| format!("{}: {e}", self.file.display())).and_then(|line| {
                if line.trim().is_empty() {
                    return Ok(None);
                }
                serde_json::from_str(&line)
                    .map(Some)
                    .map_err(|e| format!("{} line {}: {e}", self.file.display(), i + 1))
            });
            match parsed {
                Ok(Some(tag)) => tags.push(tag),
                Ok(None) => {}
                Err(message) => {
                    self.done = true;
                    return Some(Err(ClientError::Request(message)));
                }
            }
        }
        if tags.is_empty() {
            self.done = true;
            return None;
        }
        Some(Ok(tags))
    }
}

/// Polls `url/health` until it answers ready or `timeout` passes.
pub async fn wait_healthy(url: &str, timeout: Duration) -> bool {
    let Ok(client) = Client::builder([url]).retries(0).timeout(Duration::from_secs(5)).build() else { return false };
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if client.health(HealthMode::All).await.is_ok_and(|r| r.ready) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    /// The connection arguments of a parsed `leaf` command line.
    fn conn_of(args: &[&str]) -> ConnArgs {
        match Cli::try_parse_from(args).unwrap().command {
            Command::Health { conn, .. } | Command::Get { conn, .. } => conn,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tls_flags_reach_the_client() {
        // Global flags: accepted after the subcommand's own arguments too.
        let conn = conn_of(&[
            "leaf",
            "get",
            "segment",
            "t",
            "--url",
            "https://10.0.0.1:8443",
            "--ca",
            "/etc/leaf/ca.pem",
            "--client-cert",
            "/etc/leaf/client-ops.pem",
            "--client-key",
            "/etc/leaf/client-ops-key.pem",
        ]);
        assert_eq!(conn.ca.as_deref(), Some(Path::new("/etc/leaf/ca.pem")));
        assert_eq!(conn.client_cert.as_deref(), Some(Path::new("/etc/leaf/client-ops.pem")));
        assert_eq!(conn.client_key.as_deref(), Some(Path::new("/etc/leaf/client-ops-key.pem")));
        // The files are read when the client is built: a missing CA is a usage error (exit 2).
        let conn = conn_of(&["leaf", "health", "--url", "https://127.0.0.1:1", "--ca", "/nonexistent/leaf-ca.pem"]);
        assert_eq!(connect(conn, Duration::from_secs(1)).unwrap_err(), ExitCode::from(2));
        // A certificate without its key.
        let conn = conn_of(&["leaf", "health", "--client-cert", "/nonexistent/c.pem"]);
        assert_eq!(connect(conn, Duration::from_secs(1)).unwrap_err(), ExitCode::from(2));
        // Plain http:// with no TLS flag still builds.
        assert!(connect(conn_of(&["leaf", "health", "--url", "http://127.0.0.1:1"]), Duration::from_secs(1)).is_ok());
    }

    /// The batches of lines `text` makes, each as its tags' names or the error's message.
    fn batches_of(text: &str) -> Vec<Result<Vec<String>, String>> {
        let lines = text.lines().map(|l| Ok(l.to_string())).enumerate();
        let batches = JsonLineBatches { lines, file: Path::new("f.jsonl"), done: false };
        batches
            .map(|b| match b {
                Ok(tags) => Ok(tags.into_iter().map(|t| t.tag).collect()),
                Err(e) => Err(e.to_string()),
            })
            .collect()
    }

    #[test]
    fn a_file_is_cut_into_full_requests_blank_lines_skipped() {
        let max = leaf_api::tag::MAX_TAGS_PER_REQUEST;
        let mut lines: Vec<String> = (0..2 * max + 3).map(|i| format!(r#"{{"tag":"t-{i}","step":1}}"#)).collect();
        lines.insert(5, "  ".into());
        lines.push(String::new());
        let got = batches_of(&lines.join("\n"));
        let sizes: Vec<usize> = got.iter().map(|b| b.as_ref().unwrap().len()).collect();
        assert_eq!(sizes, [max, max, 3]);
        assert_eq!(got[0].as_ref().unwrap()[0], "t-0");
        assert_eq!(got[2].as_ref().unwrap()[2], format!("t-{}", 2 * max + 2));
        assert!(batches_of("").is_empty());
        assert!(batches_of("\n \n").is_empty());
    }

    #[test]
    fn a_line_that_is_not_a_tag_ends_the_batches_with_its_number() {
        let got = batches_of("{\"tag\":\"a\",\"step\":1}\nnot json\n{\"tag\":\"b\",\"step\":1}");
        assert_eq!(got.len(), 1, "{got:?}");
        let e = got[0].as_ref().unwrap_err();
        assert!(e.contains("f.jsonl line 2"), "{e}");
    }

    /// A stand-in for a node's batch endpoint that records the most requests it held at once:
    /// each is held until `target` are in (or a second passed), then answered.
    async fn counting_batch_server(target: usize) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let handler = {
            let (now, most) = (now.clone(), most.clone());
            move || {
                let (now, most) = (now.clone(), most.clone());
                async move {
                    let here = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(here, Ordering::SeqCst);
                    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
                    while now.load(Ordering::SeqCst) < target && tokio::time::Instant::now() < deadline {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    most.fetch_max(now.load(Ordering::SeqCst), Ordering::SeqCst);
                    now.fetch_sub(1, Ordering::SeqCst);
                    axum::Json(leaf_api::types::CreateTagsResponse { created: vec!["x".into()], existing: vec![] })
                }
            }
        };
        let app = axum::Router::new().route(leaf_api::routes::ADMIN_TAGS_BATCH, axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, most)
    }

    /// `--in-flight N` keeps N requests outstanding at once; 1 sends them one after another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn create_batch_keeps_its_requests_in_flight_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tags.jsonl");
        let lines: Vec<String> =
            (0..4 * leaf_api::tag::MAX_TAGS_PER_REQUEST).map(|i| format!(r#"{{"tag":"t-{i}","step":1}}"#)).collect();
        std::fs::write(&file, lines.join("\n")).unwrap();
        for in_flight in [4, 2, 1] {
            let (url, most) = counting_batch_server(in_flight).await;
            let client = Client::builder([url]).build().unwrap();
            let done = create_batch(&client, &file, in_flight).await.unwrap();
            assert_eq!(done.created, 4, "one answer per request");
            assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), in_flight, "--in-flight {in_flight}");
        }
    }
}
