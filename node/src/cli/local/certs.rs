//! `leaf certs ca|node|client|bundle`: the command-line face of [`crate::certs`]. `ca`, `node`
//! and `client` print each file they wrote, one per line; `bundle` prints `wrote PATH` or
//! `kept PATH` per file, and its warnings on stderr. Exit 0, 1 when a file could not be read
//! or written (or a key not generated), 2 when the input or the directory's state (an
//! existing file, no CA) was refused.
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::certs::bundle::{Action, Bundle, NodeSpec, Report};
use crate::certs::{self, CertsError, Written};

#[derive(Subcommand, Debug)]
pub enum CertsCmd {
    /// Create a development CA: DIR/ca.pem and DIR/ca-key.pem (ECDSA P-256, self-signed).
    Ca {
        #[command(flatten)]
        out: Out,
        /// Days the CA is valid (1–36500).
        #[arg(long, default_value_t = 3650)]
        days: u32,
    },
    /// Issue a node certificate: DIR/node-ID.pem and DIR/node-ID-key.pem, signed by DIR's CA.
    ///
    /// It names urn:leaf:node:ID and every --host (a DNS or IP subject alternative name), and
    /// serves both as the node's server certificate and as its client certificate to peers.
    Node {
        #[command(flatten)]
        out: Out,
        /// The node's Raft ID (at least 1).
        #[arg(long)]
        id: u64,
        /// A DNS name or IP address the node is reached at (repeat for each; at least one).
        #[arg(long = "host", value_name = "HOST", required = true)]
        hosts: Vec<String>,
        /// Days the certificate is valid (1–36500, within the CA's own validity).
        #[arg(long, default_value_t = 825)]
        days: u32,
    },
    /// Issue a client certificate: DIR/client-NAME.pem and DIR/client-NAME-key.pem, signed by
    /// DIR's CA.
    ///
    /// It names urn:leaf:client:NAME; list NAME in a node's `tls.admin_clients` to let it use
    /// the admin API without the bearer token.
    Client {
        #[command(flatten)]
        out: Out,
        /// The client's name: 1–64 of A-Z a-z 0-9 _ . -
        #[arg(long)]
        name: String,
        /// Days the certificate is valid (1–36500, within the CA's own validity).
        #[arg(long, default_value_t = 825)]
        days: u32,
    },
    /// Make whatever is missing of a CA and the listed node and client certificates; keep
    /// what exists (safe to run on every start).
    ///
    /// Creates the CA in --ca-dir (default: --dir) unless its ca.pem exists, copies ca.pem
    /// into --dir when --ca-dir is another directory (nodes then mount --dir without the CA
    /// key), and issues each certificate whose files are not in --dir yet. Prints `wrote PATH`
    /// or `kept PATH` per file; a kept certificate that does not fit (another CA, a host it
    /// lacks, expired) is kept with a warning.
    Bundle {
        /// Directory of ca.pem and the node and client certificates (created if missing).
        #[arg(long)]
        dir: PathBuf,
        /// Directory of the CA: ca.pem and ca-key.pem (default: --dir).
        #[arg(long)]
        ca_dir: Option<PathBuf>,
        /// A node: its ID and every DNS name or IP address it is dialled at (repeat per node).
        #[arg(long = "node", value_name = "ID=HOST[,HOST...]")]
        nodes: Vec<NodeSpec>,
        /// A client certificate's name (repeat per client).
        #[arg(long = "client", value_name = "NAME")]
        clients: Vec<String>,
        /// Days the certificates issued now are valid (1–36500, within the CA's validity).
        #[arg(long, default_value_t = 825)]
        days: u32,
        /// Days a CA created now is valid (1–36500).
        #[arg(long, default_value_t = 3650)]
        ca_days: u32,
    },
}

#[derive(Args, Debug)]
pub struct Out {
    /// Directory of the CA and the certificates (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// Replace files that already exist (else nothing is written).
    #[arg(long)]
    force: bool,
}

/// Runs one `leaf certs` command.
pub fn run(cmd: CertsCmd) -> ExitCode {
    let result = match cmd {
        CertsCmd::Bundle { dir, ca_dir, nodes, clients, days, ca_days } => {
            let bundle =
                Bundle { dir: &dir, ca_dir: ca_dir.as_deref(), nodes: &nodes, clients: &clients, days, ca_days };
            let mut report = Report::default();
            let result = bundle.run(&mut report);
            print_report(&report);
            return match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => failed(e),
            };
        }
        CertsCmd::Ca { out, days } => certs::create_ca(&out.dir, days, out.force),
        CertsCmd::Node { out, id, hosts, days } => certs::issue_node(&out.dir, id, &hosts, days, out.force),
        CertsCmd::Client { out, name, days } => certs::issue_client(&out.dir, &name, days, out.force),
    };
    match result {
        Ok(written) => {
            print_written(&written);
            ExitCode::SUCCESS
        }
        Err(e) => failed(e),
    }
}

fn failed(e: CertsError) -> ExitCode {
    eprintln!("error: {e}");
    match e {
        CertsError::Io { .. } | CertsError::Rcgen(_) => ExitCode::FAILURE,
        _ => ExitCode::from(2),
    }
}

fn print_report(report: &Report) {
    for (action, path) in &report.files {
        let verb = match action {
            Action::Wrote => "wrote",
            Action::Kept => "kept",
        };
        println!("{verb} {}", path.display());
    }
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
}

fn print_written(written: &Written) {
    for path in written.paths() {
        println!("{}", path.display());
    }
}
