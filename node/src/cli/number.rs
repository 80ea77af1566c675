//! `leaf number …`: a gapless series' number for a key — issued final at once, reserved until
//! a deadline, and a reservation confirmed or voided. Each prints the number as JSON; each is
//! safe to repeat (the same key answers the same number, a settlement happens once).
use clap::Subcommand;
use leaf_client::Client;

use super::remote::print_json;

#[derive(Subcommand, Debug)]
pub enum NumberCmd {
    /// The next number of TAG for KEY (the caller's document reference), final at once, or
    /// the one KEY has.
    Issue { tag: String, key: String },
    /// The next number of TAG for KEY, reserved until a deadline: confirm or void it before
    /// then, or the leader voids it (`expired`).
    Reserve {
        tag: String,
        key: String,
        /// Seconds the reservation is held (1 to 2592000; the node's 900 when absent).
        #[arg(long)]
        hold: Option<u64>,
    },
    /// Make KEY's reserved number final.
    Confirm { tag: String, key: String },
    /// Void KEY's reserved number: it keeps its place with REASON and is never issued again.
    Void {
        tag: String,
        key: String,
        /// Why (1 to 256 bytes of text), kept in the ledger.
        #[arg(long)]
        reason: String,
    },
}

pub async fn number(client: &Client, cmd: NumberCmd) -> std::process::ExitCode {
    match cmd {
        NumberCmd::Issue { tag, key } => print_json(client.gapless(&tag).issue(&key).await),
        NumberCmd::Reserve { tag, key, hold } => print_json(client.gapless(&tag).reserve(&key, hold).await),
        NumberCmd::Confirm { tag, key } => print_json(client.gapless(&tag).confirm(&key).await),
        NumberCmd::Void { tag, key, reason } => print_json(client.gapless(&tag).void(&key, &reason).await),
    }
}
