//! `leaf region …` (a global tier's regions: list, join by hand, retire; homes: list, move),
//! over the admin API
//! of the global tier's nodes (`--url`).
use std::process::ExitCode;

use clap::Subcommand;
use leaf_api::regions::JoinRegionRequest;
use leaf_api::types::ListQuery;
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
    /// List the homes of monotonic tags and gapless series, a page in name order: each one's
    /// region, epoch, and the region it moved from. Needs the cluster right.
    Homes {
        /// Only tags that start with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Only tags after this one: the last tag of the previous page.
        #[arg(long)]
        after: Option<String>,
        /// Most homes on the page.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Move a monotonic tag's home to region `to`: the new home serves it once the old one let
    /// go of it, or its lease and grace ran out, and every ID it serves is above the old
    /// home's. A gapless series never moves. Needs the cluster right.
    MoveHome { tag: String, to: String },
}

pub async fn region(client: &Client, cmd: RegionCmd) -> ExitCode {
    match cmd {
        RegionCmd::List => print_json(client.regions().await),
        RegionCmd::Join { name, workers } => print_json(client.join_region(&JoinRegionRequest { name, workers }).await),
        RegionCmd::Retire { name } => print_json(client.retire_region(&name).await),
        RegionCmd::Homes { prefix, after, limit } => {
            print_json(client.homes(&ListQuery { prefix, after, limit }).await)
        }
        RegionCmd::MoveHome { tag, to } => print_json(client.move_home(&tag, &to).await),
    }
}
