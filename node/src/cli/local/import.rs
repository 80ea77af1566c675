//! `leaf import leaf-mysql` and `leaf import leaf-csv`: Leaf's tags into the cluster
//! ([`crate::import`]; the cut-over is in deploy/README.md, "Moving from Leaf").
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use leaf_client::Client;

use crate::import::plan::{Floor, LeafRow};
use crate::import::{self, mysql, ImportError, Options, Outcome};

#[derive(Subcommand, Debug)]
pub enum ImportCmd {
    /// Read `leaf_alloc` from a running MySQL or MariaDB and create every tag in the cluster,
    /// starting above anything Leaf can have handed out. Fence the Leaf servers first.
    LeafMysql {
        /// mysql://user@host:port/database (add ?require_ssl=true for TLS), with the password
        /// in LEAF_IMPORT_MYSQL_PASSWORD; or the whole URL, password included, in
        /// LEAF_IMPORT_MYSQL_URL. A password on the command line is refused (any user can read
        /// it with ps). Never printed; the password is masked in every message.
        #[arg(long, env = "LEAF_IMPORT_MYSQL_URL", hide_env_values = true)]
        url: String,
        /// The table (`table` or `database.table`).
        #[arg(long, default_value = "leaf_alloc")]
        table: String,
        /// The table is read twice this far apart; a `max_id` that changed means a Leaf server
        /// still allocates, and the import is refused (unless --allow-live).
        #[arg(long, default_value_t = 3000)]
        settle_ms: u64,
        /// Import although Leaf servers still allocate: only with a margin of at least one
        /// allocation, and never safe for a server that goes on allocating after the import.
        #[arg(long)]
        allow_live: bool,
        /// TAG=db.table.column (or TAG=table.column, in the URL's database), repeatable: a
        /// business table column holding IDs of the Leaf tag TAG. The tag starts at least at
        /// MAX(column) + 1, for IDs in use that Leaf's max_id does not account for (copied from
        /// another system, a tag reset by hand). An empty table constrains nothing; a TAG not
        /// being imported, a column that is not of integers or a negative MAX stops the import
        /// before anything is created. Read on the same connection, after the Leaf servers were
        /// fenced; use an indexed column (a MAX over one without an index scans the table).
        #[arg(long = "check-column", value_name = "TAG=DB.TABLE.COLUMN", value_parser = mysql::ColumnCheck::parse)]
        check_column: Vec<mysql::ColumnCheck>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// The same from a CSV export of `leaf_alloc` (a header with biz_tag, max_id, step and
    /// optionally description), taken after the Leaf servers were fenced.
    LeafCsv {
        #[arg(long)]
        file: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
    },
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Base URL of a node of the cluster to import into.
    #[arg(long, env = "LEAF_URL", default_value = "http://127.0.0.1:8080")]
    node: String,
    /// The admin token (or a scoped token with the tags right on every imported tag).
    #[arg(long, env = "LEAF_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// PEM file of the CA that signed the node's certificate, for an https:// node.
    #[arg(long, env = "LEAF_CA")]
    ca: Option<PathBuf>,
    /// PEM client certificate for a node that asks for one (with --client-key).
    #[arg(long, env = "LEAF_CLIENT_CERT")]
    client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, env = "LEAF_CLIENT_KEY")]
    client_key: Option<PathBuf>,
    /// Start each tag this many of Leaf's largest allocations (max(step, 1,000,000)) above its
    /// max_id, for an allocation in flight at the fence. 0 only when every Leaf server is
    /// stopped.
    #[arg(long, default_value_t = 1)]
    margin_allocations: u32,
    /// Import the valid rows although others are invalid (tag names the cluster refuses, bad
    /// steps); without it nothing is created while any row is invalid.
    #[arg(long)]
    skip_invalid: bool,
    /// Only these tags (comma-separated).
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// Print the plan; create nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the outcome as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

impl ImportCmd {
    /// The node to import into.
    pub fn conn(&self) -> crate::cli::remote::ConnArgs {
        let c = match self {
            ImportCmd::LeafMysql { common, .. } | ImportCmd::LeafCsv { common, .. } => common,
        };
        crate::cli::remote::ConnArgs {
            url: c.node.clone(),
            token: c.token.clone(),
            ca: c.ca.clone(),
            client_cert: c.client_cert.clone(),
            client_key: c.client_key.clone(),
        }
    }
}

impl CommonArgs {
    fn options(&self) -> Options {
        Options {
            margin_allocations: self.margin_allocations,
            skip_invalid: self.skip_invalid,
            dry_run: self.dry_run,
            only: self.tags.clone(),
            floors: Vec::new(),
        }
    }
}

pub async fn run(client: &Client, cmd: ImportCmd) -> ExitCode {
    let (rows, floors, common) = match read(cmd).await {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = Options { floors, ..common.options() };
    match import::import(client, rows, &opts).await {
        Ok(outcomes) => report(&outcomes, common.json),
        Err(ImportError::Refused(e)) => {
            eprintln!("error: {e}; nothing was created");
            ExitCode::from(2)
        }
        Err(ImportError::Cluster(e)) => crate::cli::remote::fail(&e),
    }
}

/// The rows to import and the `--check-column` floors, after the source's own checks.
async fn read(cmd: ImportCmd) -> Result<(Vec<LeafRow>, Vec<Floor>, CommonArgs), String> {
    match cmd {
        ImportCmd::LeafMysql { url, table, settle_ms, allow_live, check_column, common } => {
            if allow_live && common.margin_allocations == 0 {
                return Err("--allow-live needs --margin-allocations of at least 1".into());
            }
            // args_os: an argument that is not UTF-8 must not panic here (it is not the URL).
            mysql::check_not_in_args(&url, std::env::args_os().map(|a| a.to_string_lossy().into_owned()))?;
            let password = std::env::var(mysql::PASSWORD_ENV).ok();
            let (first, _) = mysql::read(&url, password.as_deref(), &table, &[]).await?;
            // A check on a tag outside the import is refused before any business table is read
            // (import::import refuses it again, on the rows it is given).
            let opts = common.options();
            let unknown = import::plan::unknown_tags(
                first.iter().map(|r| r.biz_tag.as_str()).filter(|t| opts.selects(t)),
                check_column.iter().map(|c| c.tag.as_str()),
            );
            if !unknown.is_empty() {
                return Err(format!(
                    "--check-column names tags that are not being imported: {} (not in {table}, or left out by \
                     --tags); nothing was created",
                    unknown.join(", ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(settle_ms)).await;
            let (second, floors) = mysql::read(&url, password.as_deref(), &table, &check_column).await?;
            let changed = import::changed_between(&first, &second);
            if !changed.is_empty() && !allow_live {
                let some: Vec<&str> = changed.iter().take(10).map(String::as_str).collect();
                return Err(format!(
                    "{} rows changed within {settle_ms} ms ({}…): a Leaf server is still allocating. Stop or \
                     fence the Leaf servers first (deploy/README.md, \"Moving from Leaf\"), or pass --allow-live",
                    changed.len(),
                    some.join(", ")
                ));
            }
            Ok((second, floors, common))
        }
        ImportCmd::LeafCsv { file, common } => {
            let meta = std::fs::metadata(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            if meta.len() > import::csv::MAX_CSV_BYTES as u64 {
                return Err(format!("{} is over {} bytes", file.display(), import::csv::MAX_CSV_BYTES));
            }
            let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            Ok((import::csv::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?, Vec::new(), common))
        }
    }
}

/// Prints the outcomes; exit 0 when every row ended well, 2 otherwise.
fn report(outcomes: &[Outcome], json: bool) -> ExitCode {
    if json {
        println!("{}", serde_json::to_string(outcomes).unwrap_or_default());
    } else {
        println!("{:<40} {:>20} {:>12} {:>20}  status", "tag", "leaf max_id", "step", "first ID");
        for o in outcomes {
            let first = o.first_id.map(|f| f.to_string()).unwrap_or_else(|| "-".into());
            let status = serde_json::to_value(o.status).ok().and_then(|v| v.as_str().map(str::to_string));
            let note = o.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            println!(
                "{:<40} {:>20} {:>12} {:>20}  {}{note}",
                o.tag,
                o.leaf_max_id,
                o.step,
                first,
                status.unwrap_or_default()
            );
        }
    }
    if outcomes.iter().all(|o| o.status.ok()) {
        ExitCode::SUCCESS
    } else {
        let bad = outcomes.iter().filter(|o| !o.status.ok()).count();
        eprintln!("error: {bad} of {} rows were not imported", outcomes.len());
        ExitCode::from(2)
    }
}
