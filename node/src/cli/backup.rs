//! `leaf backup` (take one from a running cluster, check one, make an encryption key) and
//! `leaf restore` (a backup into a new cluster's first node, offline). The work is in
//! [`crate::backup`]; this file parses, prints and picks exit codes.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use age::secrecy::ExposeSecret;
use leaf_raft_store::restore::{MarginSource, Outcome, Override, Plan};

use super::remote::ConnArgs;
use crate::backup::crypt::{self, Encryption, Keys};
use crate::backup::restore::{self, Loaded};
use crate::config::{Config, Overrides};

/// `leaf backup`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BackupCmd {
    #[command(subcommand)]
    cmd: Option<BackupSub>,
    #[command(flatten)]
    take: TakeArgs,
}

#[derive(clap::Subcommand, Debug)]
enum BackupSub {
    /// Read a backup whole and check it (digest, structure, decryption); print what it holds.
    Verify {
        file: PathBuf,
        #[command(flatten)]
        keys: KeyArgs,
    },
    /// Make an age key pair for encrypted backups: the identity file (0600) restores them, the
    /// printed public key (`age1...`) is what `--recipient` and `[backup] recipient` take.
    Keygen {
        /// Where to write the identity file (refused if it exists).
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct TakeArgs {
    /// The file to write (0600; refused if it exists). Required unless a subcommand is given.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Encrypt to this age recipient (`age1...`, from `leaf backup keygen`).
    #[arg(long, conflicts_with = "passphrase_file")]
    recipient: Option<String>,
    /// Encrypt with the passphrase on this file's first line.
    #[arg(long)]
    passphrase_file: Option<PathBuf>,
    /// Other nodes to try, in order, if the one of --url fails or dies mid-backup (repeat, or
    /// separate with commas).
    #[arg(long, value_delimiter = ',')]
    also: Vec<String>,
    #[command(flatten)]
    conn: ConnArgs,
}

/// How an encrypted backup is opened.
#[derive(clap::Args, Debug, Default)]
struct KeyArgs {
    /// age identity file (from `leaf backup keygen`) of an encrypted backup.
    #[arg(long)]
    identity: Option<PathBuf>,
    /// File whose first line is the passphrase of an encrypted backup.
    #[arg(long = "passphrase-file", id = "decrypt_passphrase_file")]
    passphrase_file: Option<PathBuf>,
}

impl KeyArgs {
    fn keys(&self) -> Result<Keys, crypt::CryptError> {
        let identities = self.identity.as_deref().map(crypt::read_identity_file).transpose()?.unwrap_or_default();
        let passphrase = self.passphrase_file.as_deref().map(crypt::read_passphrase_file).transpose()?;
        Ok(Keys { identities, passphrase })
    }
}

/// `leaf restore FILE`.
#[derive(clap::Args, Debug)]
pub struct RestoreCmd {
    /// The backup file (`leaf backup`, or a scheduled one from `[backup] dir`).
    file: PathBuf,
    /// Print the plan (each tag's jump) and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// A tag's margin instead of the automatic one, as TAG=N (TAG `*`: every tag without its
    /// own). Repeat for more tags.
    #[arg(long, value_parser = parse_tag_value)]
    margin: Vec<(String, i64)>,
    /// A tag's next counter value is at least N, as TAG=N (e.g. a table's MAX(id) + 1; TAG `*`:
    /// every tag). Repeat for more tags.
    #[arg(long, value_parser = parse_tag_value)]
    at_least: Vec<(String, i64)>,
    /// Restore even when some tags have no room left past their margin: they are restored
    /// exhausted (they hand out nothing more), never below it.
    #[arg(long)]
    allow_exhausted: bool,
    /// Print the plan as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    keys: KeyArgs,
    /// The node's TOML configuration (its `node_id`, `data_dir`, `peers`, `http_addr`,
    /// `advertise_addr`); `LEAF_*` variables apply as for `leaf serve`.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// This node's Raft ID.
    #[arg(long)]
    node_id: Option<u64>,
    /// The data directory to write (absent or empty).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The address the node will listen on (a one-node cluster records it as the node's).
    #[arg(long)]
    http_addr: Option<std::net::SocketAddr>,
    /// The new cluster's members, "1=host:port,2=host:port,3=host:port" (this node among them).
    #[arg(long)]
    peers: Option<crate::config::Peers>,
}

/// `TAG=N`.
fn parse_tag_value(s: &str) -> Result<(String, i64), String> {
    let (tag, n) = s.rsplit_once('=').ok_or_else(|| format!("{s:?}: expected TAG=N"))?;
    if tag != "*" {
        leaf_api::tag::validate_tag(tag).map_err(|e| format!("{tag:?}: {e}"))?;
    }
    let n: i64 = n.parse().map_err(|e| format!("{n:?}: {e}"))?;
    if n < 0 {
        return Err(format!("{s:?}: N must not be negative"));
    }
    Ok((tag.to_string(), n))
}

fn usage(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(2)
}

/// The wall clock (Unix ms).
fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as i64)
}

pub async fn backup(cmd: BackupCmd) -> ExitCode {
    match cmd.cmd {
        Some(BackupSub::Keygen { out }) => keygen(&out),
        Some(BackupSub::Verify { file, keys }) => verify(&file, &keys),
        None => take(cmd.take).await,
    }
}

fn keygen(out: &Path) -> ExitCode {
    let (text, public) = crypt::generate();
    let written = crate::backup::private_file(out).and_then(|mut f| {
        f.write_all(text.expose_secret().as_bytes())?;
        f.sync_all()
    });
    if let Err(e) = written {
        return usage(&format!("{}: {e}", out.display()));
    }
    println!("{public}");
    eprintln!("identity written to {} (keep it safe: it restores every backup made to {public})", out.display());
    ExitCode::SUCCESS
}

fn verify(file: &Path, keys: &KeyArgs) -> ExitCode {
    let loaded = match keys.keys().map_err(restore::RestoreError::from).and_then(|k| restore::load(file, &k)) {
        Ok(l) => l,
        Err(e) => return usage(&e),
    };
    print_summary(&loaded);
    ExitCode::SUCCESS
}

fn print_summary(l: &Loaded) {
    let h = &l.header;
    let when = chrono::DateTime::from_timestamp_millis(h.taken_ms).map_or(h.taken_ms.to_string(), |t| t.to_rfc3339());
    println!(
        "backup {} taken {when} by node {} at log index {}: {} tags, {} tokens, {} audit records, {} templates, \
         {} snowflake workers; restore generation {}{}",
        l.id(),
        h.taken_by,
        h.applied.map_or(0, |a| a.index),
        l.data.state.tags.len(),
        l.data.state.tokens.len(),
        l.data.state.audit.records.len(),
        l.data.state.templates.len(),
        l.data.state.workers.len(),
        h.generation,
        if l.encrypted { "; encrypted" } else { "" },
    );
}

async fn take(args: TakeArgs) -> ExitCode {
    let Some(out) = args.out.clone() else {
        return usage(&"--out FILE is required (or a subcommand: verify, keygen)");
    };
    let enc = match (&args.recipient, &args.passphrase_file) {
        (Some(r), _) => match crypt::parse_recipient(r) {
            Ok(r) => Encryption::Recipient(Box::new(r)),
            Err(e) => return usage(&e),
        },
        (None, Some(p)) => match crypt::read_passphrase_file(p) {
            Ok(p) => Encryption::Passphrase(p),
            Err(e) => return usage(&e),
        },
        (None, None) => Encryption::None,
    };
    if out.exists() {
        return usage(&format!("{} exists: a backup never overwrites a file", out.display()));
    }
    let mut nodes = vec![args.conn.url.clone()];
    nodes.extend(args.also.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
    let client = match super::remote::connect(args.conn, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let part = out.with_file_name(format!(
        ".{}.part",
        out.file_name().map_or("backup".into(), |n| n.to_string_lossy().into_owned())
    ));
    let mut last = String::new();
    for node in &nodes {
        let _ = std::fs::remove_file(&part);
        match download_checked(&client, node, &part).await {
            Ok(loaded) => {
                let done = seal(&part, &out, &enc);
                let _ = std::fs::remove_file(&part);
                if let Err(e) = done {
                    return usage(&e);
                }
                print_summary(&loaded);
                eprintln!("written to {}", out.display());
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("warning: backup from {node} failed: {e}");
                last = e;
            }
        }
    }
    let _ = std::fs::remove_file(&part);
    eprintln!("error: no node gave a whole backup (last: {last}); nothing was written");
    ExitCode::from(1)
}

/// Downloads a backup from `node` into `part` (0600) and reads it back whole.
async fn download_checked(client: &leaf_client::Client, node: &str, part: &Path) -> Result<Loaded, String> {
    let file = crate::backup::private_file(part).map_err(|e| format!("{}: {e}", part.display()))?;
    let mut file = tokio::fs::File::from_std(file);
    let node = node.trim_end_matches('/');
    // A node's answer starts once it has written the whole backup (a large state takes a while).
    client.download_backup(node, &mut file, Duration::from_secs(600)).await.map_err(|e| e.to_string())?;
    file.sync_all().await.map_err(|e| e.to_string())?;
    drop(file);
    restore::load(part, &Keys::default()).map_err(|e| e.to_string())
}

/// Moves the checked plaintext `part` to `out`: as it is, or encrypted into a new file.
fn seal(part: &Path, out: &Path, enc: &Encryption) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", out.display());
    if matches!(enc, Encryption::None) {
        std::fs::rename(part, out).map_err(|e| err(&e))?;
    } else {
        let file = crate::backup::private_file(out).map_err(|e| err(&e))?;
        let mut sink = crypt::Sink::new(file, enc).map_err(|e| err(&e))?;
        let copied = std::fs::File::open(part).and_then(|mut p| std::io::copy(&mut p, &mut sink));
        let finished = copied.and_then(|_| sink.finish()).and_then(|f| f.sync_all());
        if let Err(e) = finished {
            let _ = std::fs::remove_file(out);
            return Err(err(&e));
        }
    }
    if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err(&e))?;
    }
    Ok(())
}

pub async fn restore(cmd: RestoreCmd) -> ExitCode {
    let overrides = Overrides {
        node_id: cmd.node_id,
        data_dir: cmd.data_dir.clone(),
        http_addr: cmd.http_addr,
        peers: cmd.peers.clone(),
        ..Overrides::default()
    };
    let config = match Config::load(cmd.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    let keys = match cmd.keys.keys() {
        Ok(k) => k,
        Err(e) => return usage(&e),
    };
    let loaded = match restore::load(&cmd.file, &keys) {
        Ok(l) => l,
        Err(e) => return usage(&e),
    };
    print_summary(&loaded);
    if !cmd.dry_run {
        if let Err(e) = restore::check_target(&config, &loaded).and_then(|_| restore::members_of(&config).map(|_| ())) {
            return usage(&e);
        }
    }
    let mut overrides: BTreeMap<String, Override> = BTreeMap::new();
    for (tag, n) in &cmd.margin {
        overrides.entry(tag.clone()).or_default().margin = Some(*n);
    }
    for (tag, n) in &cmd.at_least {
        overrides.entry(tag.clone()).or_default().at_least = Some(*n);
    }
    let now = now_ms();
    let plan = restore::plan_of(&loaded, now, overrides);
    if cmd.json {
        match serde_json::to_string_pretty(&plan) {
            Ok(s) => println!("{s}"),
            Err(e) => return usage(&e),
        }
    } else {
        print_plan(&plan);
    }
    let too_far: Vec<&str> = plan.gapless_too_far().map(|j| j.tag.as_str()).collect();
    if !too_far.is_empty() && !cmd.dry_run {
        return usage(&format!(
            "{} gapless series ({}) have a margin larger than a restore voids ({} numbers a period, within the \
             ledger's cap): give them a smaller --margin (the numbers the lost cluster can have issued since the \
             backup)",
            too_far.len(),
            too_far.iter().take(20).copied().collect::<Vec<_>>().join(", "),
            leaf_raft_store::restore::GAPLESS_MAX_MARGIN
        ));
    }
    if !plan.unfloored.is_empty() && !cmd.dry_run {
        return usage(&format!(
            "this is a global tier's backup, and {} of its tags ({}) have no --at-least floor: the lost tier's \
             block grants since the backup are not in the rates a backup records, so no automatic margin covers \
             them. Give every tag a floor above every block the regions hold (the highest `high` of the tag's \
             blocks in any region, e.g. from its leader's state), or --at-least '*'=N",
            plan.unfloored.len(),
            plan.unfloored.iter().take(20).map(String::as_str).collect::<Vec<_>>().join(", ")
        ));
    }
    let exhausted: Vec<&str> = plan.exhausted().map(|j| j.tag.as_str()).collect();
    if !exhausted.is_empty() {
        eprintln!(
            "warning: {} tag(s) have no room past their margin and would hand out nothing more: {}",
            exhausted.len(),
            exhausted.iter().take(20).copied().collect::<Vec<_>>().join(", ")
        );
        if !cmd.allow_exhausted && !cmd.dry_run {
            return usage(&"refusing to restore them exhausted without --allow-exhausted (or give them a --margin)");
        }
    }
    if cmd.dry_run {
        eprintln!("dry run: nothing written");
        return ExitCode::SUCCESS;
    }
    let generation = loaded.header.generation + 1;
    match restore::write(&config, loaded, &plan, now).await {
        Ok(log_id) => {
            eprintln!(
                "restored into {} as node {} (restore generation {generation}, log index {}): start it with \
                 `leaf serve`; start the other members with blank data directories and peers that list only \
                 this node, so they cannot form a cluster of their own",
                config.data_dir.display(),
                config.node_id,
                log_id.index
            );
            ExitCode::SUCCESS
        }
        Err(e) => usage(&e),
    }
}

/// The plan as a table: one line per tag, then the snowflake floor.
fn print_plan(plan: &Plan) {
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let _ = writeln!(out, "{:<40} {:<10} {:>20} {:>20} {:>14}  margin from", "TAG", "PROFILE", "FROM", "TO", "JUMP");
    for j in &plan.jumps {
        let source = match j.source {
            MarginSource::Auto { rate_per_sec } => format!("auto (rate {rate_per_sec:.1}/s)"),
            MarginSource::Given => "--margin".to_string(),
        };
        let floor = if j.at_least.is_some() { ", --at-least" } else { "" };
        let gapless = j.profile == leaf_api::profile::Profile::Gapless;
        let unit = if gapless { "period" } else { "day" };
        let day = j.days.filter(|(a, b)| a != b).map_or(String::new(), |(a, b)| format!(", {unit} {a} -> {b}"));
        let outcome = match j.outcome {
            Outcome::Moved => String::new(),
            Outcome::Exhausted if gapless => ", GAPLESS: margin too large to void".to_string(),
            Outcome::Exhausted => ", EXHAUSTED".to_string(),
            Outcome::Gapless => format!(", GAPLESS: {} numbers voided as lost", j.margin),
        };
        let _ = writeln!(
            out,
            "{:<40} {:<10} {:>20} {:>20} {:>14}  {source}{floor}{day}{outcome}",
            j.tag,
            j.profile.as_str(),
            j.from,
            j.to,
            j.to.saturating_sub(j.from)
        );
    }
    let floor = chrono::DateTime::from_timestamp_millis(plan.snowflake_floor_ms)
        .map_or(plan.snowflake_floor_ms.to_string(), |t| t.to_rfc3339());
    let _ = writeln!(
        out,
        "snowflake: every worker ID starts after {floor} ({} ms); {:.0} s since the backup",
        plan.snowflake_floor_ms, plan.elapsed_secs
    );
}
