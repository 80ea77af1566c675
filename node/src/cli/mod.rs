//! The `leaf` command line: `serve` runs a node; the other commands talk to a node's HTTP API
//! through `leaf-client`; `bench` drives load through `leaf-loadgen`.
//!
//! Layout:
//! - this file: the command tree ([`Cli`]) and [`main`], which hands each command to its room.
//! - [`serve`]: `leaf serve` (configuration, signals, the storage-failure exit).
//! - [`remote`]: the commands that talk to a node (`tag`, `get`, `health`, `cluster`) and what
//!   they share (connection flags, printing, exit codes); [`tokens`]: `token` and `audit`;
//!   [`templates`]: `template`; [`regions`]: `region`.
//! - [`bench`]: `leaf bench` (HTTP or gRPC load).
//! - [`backup`]: `leaf backup` (take, verify, keygen) and `leaf restore`.
//! - [`ledger`]: `leaf ledger` (export a gapless series' ledger; verify an export offline);
//!   [`number`]: `leaf number` (issue, reserve, confirm, void a gapless number).
//! - [`local`]: commands that work on local files first: `certs` (a development CA) and
//!   `import` (Leaf's `leaf_alloc` into the cluster).
//!
//! The CLI stays a module tree of the node crate rather than a crate of its own: the node's
//! integration tests run the `leaf` binary (`CARGO_BIN_EXE_leaf` exists only within its own
//! package), and `leaf-test-node` wraps the same `main`.
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod backup;
mod bench;
mod ledger;
mod local;
mod number;
mod regions;
mod remote;
mod serve;
mod templates;
mod tokens;

pub use remote::wait_healthy;

use bench::BenchCmd;
use local::{certs, import};
use remote::{ClusterCmd, ConnArgs, GetCmd, TagCmd};
use serve::ServeArgs;

#[derive(Parser, Debug)]
#[command(name = "leaf", version, about = "Raft-replicated distributed ID service (a successor to Meituan's Leaf)")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a node. With no arguments: a one-node cluster on 127.0.0.1:8080, data in ./leaf-data.
    Serve(ServeArgs),
    /// Create, list, show or update tags (admin API).
    Tag {
        #[command(subcommand)]
        cmd: TagCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Scoped tokens: create, list, show, rotate, revoke (the admin token only).
    Token {
        #[command(subcommand)]
        cmd: tokens::TokenCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Tag templates: tags made on their first ID request (the admin token only).
    Template {
        #[command(subcommand)]
        cmd: templates::TemplateCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// A global tier's regions: list them, join one by hand, retire a lost one (book: Regions).
    Region {
        #[command(subcommand)]
        cmd: regions::RegionCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Move tags from Leaf: its MySQL table `leaf_alloc`, or a CSV export of it, each tag
    /// starting above anything Leaf can have handed out.
    /// (`--url` is the source database here; the cluster's node is `--node`.)
    Import {
        #[command(subcommand)]
        cmd: import::ImportCmd,
    },
    /// The audit trail: who changed tags, tokens and membership, and when.
    Audit {
        #[command(flatten)]
        args: tokens::AuditArgs,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Get IDs.
    Get {
        #[command(subcommand)]
        cmd: GetCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Print the node's health; exit 0 when ready, 1 when not ready, unreachable or slower
    /// than 3 s (for container healthchecks: the image has no curl).
    Health {
        /// Print nothing when healthy (failures still go to stderr).
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// HTTP load generator: N keep-alive connections, closed loop or a fixed rate, latency
    /// percentiles (hdrhistogram, coordinated omission corrected). `leaf bench grpc`: unary
    /// gRPC GetSegmentIds calls over HTTP/2 instead.
    Bench(BenchCmd),
    /// Inspect or change the cluster's membership (admin API of any node).
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// A gapless series' number for a key: issue one (final at once), reserve one until a
    /// deadline, confirm or void a reservation.
    Number {
        #[command(subcommand)]
        cmd: number::NumberCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// A gapless series' ledger: export it (JSON lines or CSV), or verify an export's hash
    /// chain and numbering offline.
    Ledger {
        #[command(subcommand)]
        cmd: ledger::LedgerCmd,
    },
    /// Take a backup of the whole replicated state from a running cluster into a file (0600,
    /// optionally encrypted), check one (`verify`), or make an encryption key (`keygen`).
    Backup(backup::BackupCmd),
    /// Restore a backup into a new cluster's first node (offline, into a blank data
    /// directory), every tag moved past what the lost cluster can have handed out. Prints the
    /// plan first; `--dry-run` stops there.
    Restore(backup::RestoreCmd),
    /// Create development TLS certificates: a CA, and the node and client certificates it signs.
    ///
    /// For trying TLS out and for tests: the CA key lies unencrypted on disk. Production brings
    /// its own CA (deploy/README.md). First `leaf certs ca --dir D`, then `leaf certs node` per
    /// node and `leaf certs client` per client into the same D; or `leaf certs bundle` for
    /// whatever of all that is missing (what deploy/ runs on every start).
    Certs {
        #[command(subcommand)]
        cmd: certs::CertsCmd,
    },
}

/// Entry point of the `leaf` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::serve(args),
        Command::Bench(args) => bench::bench(args),
        Command::Certs { cmd } => certs::run(cmd),
        Command::Backup(cmd) => run_local(backup::backup(cmd)),
        Command::Ledger { cmd } => run_local(ledger::ledger(cmd)),
        Command::Restore(cmd) => run_local(backup::restore(cmd)),
        other => run_local(remote::client_command(other)),
    }
}

/// Runs a command's future on a current-thread runtime.
fn run_local(f: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt.block_on(f),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_tree_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
