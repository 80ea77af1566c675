//! `leaf region …` (a global tier's regions: list, join by hand, retire), over the admin API
//! of the global tier's nodes (`--url`).
use std::process::ExitCode;

use clap::Subcommand;
use leaf_api::regions::JoinRegionRequest;
use leaf_client::Client;

use super::remote::print_json;

#[derive(Subcommand, Debug)]
pub enum RegionCmd {
    /// List the regions the global tier registered (retired ones too): each one's ID and
    /// snowflake worker IDs. Needs the cluster right.
    List,
    /// Register a region by hand (a region's leader joins by itself); a region that joined
    /// before gets its record again. Needs the regions right.
    Join {
        name: String,
        /// Snowflake worker IDs the region holds: at least its nodes.
        #[arg(long, default_value_t = 32)]
        workers: u16,
    },
    /// Retire a lost region: it gets no block any more, and its name, ID and worker IDs are
    /// never given to another region. Needs the cluster right.
    Retire { name: String },
}

pub async fn region(client: &Client, cmd: RegionCmd) -> ExitCode {
    match cmd {
        RegionCmd::List => print_json(client.regions().await),
        RegionCmd::Join { name, workers } => print_json(client.join_region(&JoinRegionRequest { name, workers }).await),
        RegionCmd::Retire { name } => print_json(client.retire_region(&name).await),
    }
}
