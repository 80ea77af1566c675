//! `[region]`: this cluster as one region of several that serve one ID space, from what a
//! global tier grants it (book: Regions).
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// This cluster as a region. Off unless `name` is set: then its leader joins the global tier,
/// adopts the region's identity, and keeps every tag in use supplied with blocks of IDs ahead
/// of its traffic; its segment IDs come only from those blocks, and its snowflake workers keep
/// to the region's worker IDs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RegionConfig {
    /// The region's name: 1 to 32 lowercase letters, digits or `-`, starting with a letter.
    /// Set on every node of the cluster, the same. Default none: not a region.
    pub name: Option<String>,
    /// The global tier's nodes, as `https://host:port` (`http://` only on loopback, for
    /// tests). Required with `name`.
    pub global: Vec<String>,
    /// A file holding a token of the global tier with the `regions` right on every tag (`*`):
    /// what the leader joins and asks for blocks with. Required with `name`; read at start, and
    /// never logged.
    pub global_token_file: Option<PathBuf>,
    /// The CA certificate (PEM) that signed the global tier's certificates, if not a public CA.
    /// Default none: the platform's roots.
    pub global_ca_file: Option<PathBuf>,
    /// Snowflake worker IDs the region asks for when it joins: at least its nodes, at most
    /// 1024. Default `32`.
    pub workers: u16,
    /// A block holds this many seconds of a tag's traffic at its measured rate; the leader asks
    /// for the next one while half of that is left. From 10 to 86400; default `600`: a region
    /// cut off from the global tier serves for at least five minutes at the current rate.
    pub block_secs: u64,
    /// The smallest block, in IDs (a tag with no measured rate yet gets this). From 1 to
    /// 1000000000; default `100000`.
    pub min_block: i64,
    /// How often the leader looks at its tags' runway, in ms. From 100 to 60000; default `1000`.
    pub check_ms: u64,
}

impl Default for RegionConfig {
    fn default() -> Self {
        RegionConfig {
            name: None,
            global: Vec::new(),
            global_token_file: None,
            global_ca_file: None,
            workers: 32,
            block_secs: 600,
            min_block: 100_000,
            check_ms: 1_000,
        }
    }
}

impl RegionConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        let Some(name) = &self.name else {
            if !self.global.is_empty() || self.global_token_file.is_some() {
                errs.push("region.global and region.global_token_file need region.name".to_string());
            }
            return;
        };
        if let Err(e) = leaf_api::regions::validate_region_name(name) {
            errs.push(format!("region.name: {e}"));
        }
        if self.global.is_empty() {
            errs.push("region.global must list the global tier's nodes".to_string());
        }
        for url in &self.global {
            match url.split_once("://") {
                Some(("https", rest)) if !rest.is_empty() => {}
                Some(("http", rest)) if loopback(rest) => {}
                _ => errs.push(format!("region.global: {url:?} is not https://host:port (http:// only on loopback)")),
            }
        }
        if self.global_token_file.is_none() {
            errs.push("region.global_token_file is required with region.name".to_string());
        }
        if !(1..=leaf_raft_store::workers::WORKER_IDS).contains(&self.workers) {
            errs.push("region.workers must be from 1 to 1024".to_string());
        }
        if !(10..=86_400).contains(&self.block_secs) {
            errs.push("region.block_secs must be from 10 to 86400".to_string());
        }
        if !(1..=leaf_api::tag::MAX_STEP).contains(&self.min_block) {
            errs.push("region.min_block must be from 1 to 1000000000".to_string());
        }
        if !(100..=60_000).contains(&self.check_ms) {
            errs.push("region.check_ms must be from 100 to 60000".to_string());
        }
    }
}

/// Whether `host:port` names a loopback host.
fn loopback(host_port: &str) -> bool {
    let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_needs_a_name_a_global_tier_and_a_token_and_sane_numbers() {
        let mut errs = Vec::new();
        RegionConfig::default().validate(&mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let ok = RegionConfig {
            name: Some("eu-west".into()),
            global: vec!["https://g1:8080".into(), "http://127.0.0.1:9000".into()],
            global_token_file: Some("/etc/leaf/global.token".into()),
            ..RegionConfig::default()
        };
        ok.validate(&mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let bad = RegionConfig {
            name: Some("EU".into()),
            global: vec!["http://g1:8080".into(), "g2:8080".into()],
            global_token_file: None,
            workers: 0,
            block_secs: 5,
            min_block: 0,
            check_ms: 99,
            ..RegionConfig::default()
        };
        bad.validate(&mut errs);
        for key in [
            "name",
            "global: \"http://g1",
            "global: \"g2",
            "global_token_file",
            "workers",
            "block_secs",
            "min_block",
            "check_ms",
        ] {
            assert!(errs.iter().any(|e| e.contains(&format!("region.{key}"))), "{key}: {errs:?}");
        }
        let mut errs = Vec::new();
        RegionConfig { global: vec!["https://g".into()], ..RegionConfig::default() }.validate(&mut errs);
        assert_eq!(errs.len(), 1, "{errs:?}");
    }
}
