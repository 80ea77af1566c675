//! `leaf bench`'s arguments (clap) and the duration syntax they share with other tools.
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use leaf_client::tls::TlsOptions;
use leaf_client::TlsError;

/// `leaf bench` arguments.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Base URL(s) of the node(s), http:// or https://, comma-separated or repeated;
    /// connections are spread over them round robin.
    #[arg(long = "url", visible_alias = "node", value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    pub urls: Vec<String>,
    /// Path and query of every request; `{rand}` is replaced by a random hex value per request
    /// (e.g. `/api/segment/get/u-{rand}`: a flood of unknown tags), `{zipf}` by a rank from
    /// 0 to --zipf-tags − 1 drawn from a Zipf distribution, zero-padded (e.g.
    /// `/api/segment/get/t-{zipf}`: many tags, a few of them hot).
    #[arg(long, default_value = "/api/segment/get/leaf-segment-test")]
    pub path: String,
    /// How many ranks `{zipf}` draws from.
    #[arg(long, default_value_t = 1000)]
    pub zipf_tags: usize,
    /// The Zipf exponent: rank k is drawn with weight 1 / (k + 1)^s (0: uniform).
    #[arg(long, default_value_t = 1.1)]
    pub zipf_s: f64,
    /// Concurrent keep-alive connections.
    #[arg(long, short = 'c', default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,
    /// How long to measure (after the warmup): e.g. 10s, 1m, 500ms.
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop after this many measured requests instead (the duration still caps the run).
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Open loop: this many requests per second in total, at fixed intervals (default: closed
    /// loop, as fast as the server answers).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub rate: Option<u64>,
    /// Requests during this first period are sent but not measured.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Worker threads of the generator (it shares the machine with what it measures).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// The TLS settings of a load generator's `https://` connections (`leaf bench` and
/// `leaf bench grpc`).
#[derive(Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// PEM file of the CA that signed the nodes' certificates, for https:// URLs (default: the
    /// platform's root certificates).
    #[arg(long, env = "LEAF_CA")]
    pub ca: Option<PathBuf>,
    /// PEM certificate to present to nodes that ask for one (mutual TLS; with --client-key).
    #[arg(long, env = "LEAF_CLIENT_CERT")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, env = "LEAF_CLIENT_KEY")]
    pub client_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The files read into [`TlsOptions`] (errors name the file, never key material).
    pub fn options(&self) -> Result<TlsOptions, TlsError> {
        TlsOptions::from_files(self.ca.as_deref(), self.client_cert.as_deref(), self.client_key.as_deref())
    }
}

/// Placeholder in `--path` replaced by a random value per request.
pub(crate) const RAND: &str = "{rand}";

/// Parses `90s`, `10m`, `1500ms`, `2h` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 10s, 1m or 500ms"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    ms.map(Duration::from_millis).ok_or_else(|| format!("{s:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_reject_nonsense() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        for bad in ["", "s", "10x", "-1s", "99999999999999999999h", "5124095576030432h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
