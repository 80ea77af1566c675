//! `leaf token …` (scoped tokens: create, list, show, rotate, revoke) and `leaf audit` (the
//! audit trail), over the admin API.
use std::process::ExitCode;

use clap::{Args, Subcommand};
use leaf_api::audit::{AuditFilter, AuditKind};
use leaf_api::tokens::{CreateTokenRequest, IdQuota, Quota, Right, RotateTokenRequest, TagPattern, TokenId};
use leaf_client::Client;

use super::remote::print_json;

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Create a scoped token; prints it with its bearer (shown only now: store it).
    Create {
        /// A name for people (the team or service that holds it).
        name: String,
        /// What it may do: ids, tags, cluster (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        rights: Vec<Right>,
        /// Tags it covers: `*`, a tag, or a prefix ending in `*` (comma-separated).
        #[arg(long, value_delimiter = ',', value_parser = TagPattern::parse)]
        tags: Vec<TagPattern>,
        /// Requests a second on each node (with --burst).
        #[arg(long, requires = "burst")]
        rate: Option<u32>,
        /// Most requests at once on each node (with --rate).
        #[arg(long, requires = "rate")]
        burst: Option<u32>,
        /// IDs a second on each node, whatever the requests they come in (with --burst-ids).
        #[arg(long, requires = "burst_ids")]
        ids_per_sec: Option<u32>,
        /// Most IDs at once on each node, and in one request (with --ids-per-sec).
        #[arg(long, requires = "ids_per_sec")]
        burst_ids: Option<u32>,
        /// The most tags it may ever create.
        #[arg(long)]
        max_tags: Option<u32>,
        /// Write the bearer to this file (mode 0600) instead of printing it, and print the
        /// token without it. If the file exists, create nothing and keep it: a setup step (a
        /// region's token for its global tier, say) can run again.
        #[arg(long)]
        bearer_file: Option<std::path::PathBuf>,
    },
    /// List the tokens (never their secrets).
    List,
    /// Show one token.
    Show { id: TokenId },
    /// Give a token a new secret; prints the new bearer.
    Rotate {
        id: TokenId,
        /// How long the old secret keeps working, in ms (default 0).
        #[arg(long)]
        grace_ms: Option<i64>,
    },
    /// Revoke a token: every node refuses it once it applied the revocation.
    Revoke { id: TokenId },
}

/// `leaf audit`: a page of the audit trail, oldest first.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only this kind: tag_created, tag_updated, token_created, token_rotated, token_revoked,
    /// learner_added, node_promoted, node_removed, obfuscated_decoded, clock_fault_set,
    /// tag_archived, tag_restored, template_put, template_deleted, cluster_restored.
    #[arg(long)]
    kind: Option<AuditKind>,
    /// Only changes of this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Only changes made by or to this token.
    #[arg(long = "token-id")]
    token_id: Option<TokenId>,
    /// Leader time at or after (Unix ms).
    #[arg(long)]
    since_ms: Option<i64>,
    /// Leader time before (Unix ms).
    #[arg(long)]
    until_ms: Option<i64>,
    /// Records after this one (the previous page's `next_after_seq`).
    #[arg(long)]
    after_seq: Option<u64>,
    /// Most records (1 to 1000; default 100).
    #[arg(long)]
    limit: Option<u32>,
}

pub async fn token(client: &Client, cmd: TokenCmd) -> ExitCode {
    match cmd {
        TokenCmd::Create { name, rights, tags, rate, burst, ids_per_sec, burst_ids, max_tags, bearer_file } => {
            let quota = rate.zip(burst).map(|(rate_per_sec, burst)| Quota { rate_per_sec, burst });
            let id_quota =
                ids_per_sec.zip(burst_ids).map(|(ids_per_sec, burst_ids)| IdQuota { ids_per_sec, burst_ids });
            let body = CreateTokenRequest { name, rights, tags, quota, id_quota, max_tags };
            match bearer_file {
                None => print_json(client.create_token(&body).await),
                Some(path) => create_into(client, &body, &path).await,
            }
        }
        TokenCmd::List => print_json(client.tokens().await),
        TokenCmd::Show { id } => print_json(client.token(id).await),
        TokenCmd::Rotate { id, grace_ms } => {
            print_json(client.rotate_token(id, &RotateTokenRequest { grace_ms }).await)
        }
        TokenCmd::Revoke { id } => print_json(client.revoke_token(id).await),
    }
}

/// `token create --bearer-file PATH`: nothing if `PATH` exists; otherwise the token, its
/// bearer written to `PATH` and never printed.
async fn create_into(client: &Client, body: &CreateTokenRequest, path: &std::path::Path) -> ExitCode {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {
            eprintln!("{} exists: kept, no token created", path.display());
            return ExitCode::SUCCESS;
        }
        Ok(_) => {
            eprintln!("error: {} exists and is not a file: no token created", path.display());
            return ExitCode::FAILURE;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            eprintln!("error: {}: {e}: no token created", path.display());
            return ExitCode::FAILURE;
        }
    }
    let issued = match client.create_token(body).await {
        Ok(issued) => issued,
        Err(e) => return print_json::<()>(Err(e)),
    };
    if let Err(e) = crate::certs::write_secret_file(path, format!("{}\n", issued.bearer).as_bytes()) {
        // The bearer is lost with this process: say which token to revoke, never the secret.
        eprintln!("error: token {} was created, but its bearer could not be stored: {e}; revoke it", issued.token.id);
        return ExitCode::FAILURE;
    }
    print_json(Ok(issued.token))
}

pub async fn audit(client: &Client, a: AuditArgs) -> ExitCode {
    let filter =
        AuditFilter { kind: a.kind, tag: a.tag, token: a.token_id, since_ms: a.since_ms, until_ms: a.until_ms };
    print_json(client.audit(&filter, a.after_seq, a.limit).await)
}
