//! `leaf template …` (tag templates: put, list, delete), over the admin API.
use std::process::ExitCode;

use clap::Subcommand;
use leaf_api::template::PutTemplateRequest;
use leaf_client::Client;

use super::remote::{print_json, TagSettings};

#[derive(Subcommand, Debug)]
pub enum TemplateCmd {
    /// Create a template, or replace its pattern and settings. A tag that does not exist and
    /// matches PATTERN is created with these settings on its first ID request by a token with
    /// the tags right on it (counted against its max_tags).
    Put {
        name: String,
        /// The tags it makes: a tag name with one '*' (at least one character), e.g.
        /// tenant-*-invoice.
        #[arg(long)]
        pattern: String,
        #[command(flatten)]
        settings: TagSettings,
    },
    /// List the templates.
    List,
    /// Delete a template (the tags it made stay).
    Delete { name: String },
}

pub async fn template(client: &Client, cmd: TemplateCmd) -> ExitCode {
    match cmd {
        TemplateCmd::Put { name, pattern, settings } => {
            let t = settings.request(String::new());
            let (step, max_id, description, profile, daily, upper_bound) =
                (t.step, t.max_id, t.description, t.profile, t.daily, t.upper_bound);
            let body = PutTemplateRequest { pattern, step, max_id, description, profile, daily, upper_bound };
            print_json(client.put_template(&name, &body).await)
        }
        TemplateCmd::List => print_json(client.templates().await),
        TemplateCmd::Delete { name } => print_json(client.delete_template(&name).await),
    }
}
