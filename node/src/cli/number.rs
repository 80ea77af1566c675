//! `leaf number …`: a gapless series' number for a key — issued final at once, reserved until
//! a deadline, and a reservation confirmed or voided. Each prints the number as JSON; each is
//! safe to repeat (the same key answers the same number, a settlement happens once).
//!
//! Without a token (where the cluster allows it), a number belongs to its settlement secret:
//! the answer prints it, and a repeat, a confirm or a void gives it back with `--secret` (or
//! `LEAF_GAPLESS_SECRET`); without one, each run of the CLI makes its own.
use clap::{Args, Subcommand};
use leaf_client::gapless::Gapless;
use leaf_client::Client;

use super::remote::print_json;

/// The settlement secret of a caller without a token.
#[derive(Args, Debug, Clone, Default)]
pub struct SecretArg {
    /// Without a token: the number's settlement secret (what the issue or reservation
    /// answered, or one of your own, 22 to 128 characters of A-Z a-z 0-9 - _).
    #[arg(long, env = "LEAF_GAPLESS_SECRET", hide_env_values = true)]
    secret: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum NumberCmd {
    /// The next number of TAG for KEY (the caller's document reference), final at once, or
    /// the one KEY has.
    Issue {
        tag: String,
        key: String,
        #[command(flatten)]
        secret: SecretArg,
    },
    /// The next number of TAG for KEY, reserved until a deadline: confirm or void it before
    /// then, or the leader voids it (`expired`).
    Reserve {
        tag: String,
        key: String,
        /// Seconds the reservation is held (1 to 2592000; the node's 900 when absent).
        #[arg(long)]
        hold: Option<u64>,
        #[command(flatten)]
        secret: SecretArg,
    },
    /// Make KEY's reserved number final.
    Confirm {
        tag: String,
        key: String,
        #[command(flatten)]
        secret: SecretArg,
    },
    /// Void KEY's reserved number: it keeps its place with REASON and is never issued again.
    Void {
        tag: String,
        key: String,
        /// Why (1 to 256 bytes of text), kept in the ledger.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        secret: SecretArg,
    },
}

pub async fn number(client: &Client, cmd: NumberCmd) -> std::process::ExitCode {
    match cmd {
        NumberCmd::Issue { tag, key, secret } => print_json(series(client, &tag, &secret).issue(&key).await),
        NumberCmd::Reserve { tag, key, hold, secret } => {
            print_json(series(client, &tag, &secret).reserve(&key, hold).await)
        }
        NumberCmd::Confirm { tag, key, secret } => print_json(series(client, &tag, &secret).confirm(&key).await),
        NumberCmd::Void { tag, key, reason, secret } => {
            print_json(series(client, &tag, &secret).void(&key, &reason).await)
        }
    }
}

/// Series `tag` of `client`, with the settlement secret given, if any.
fn series<'a>(client: &'a Client, tag: &'a str, secret: &'a SecretArg) -> Gapless<'a> {
    let g = client.gapless(tag);
    match &secret.secret {
        Some(s) => g.with_secret(s),
        None => g,
    }
}
