//! The many-tags workload of `leaf-chaos --tags N`: `N` segment tags (`chaos-z-0000000` …),
//! created through the batch API before the run, and a Zipf-distributed pick among them for
//! half of the segment requests, so a run mixes a few hot tags with a long tail of tags whose
//! first request makes their first allocation while faults hold.
use std::time::Duration;

use anyhow::bail;
use leaf_api::tag::MAX_TAGS_PER_REQUEST;
use leaf_api::types::{CreateTagRequest, CreateTagsRequest};
use leaf_client::Client;
use leaf_loadgen::zipf::Zipf;
use rand::Rng;
use tokio::time::Instant;

/// Name prefix of the many-tags workload's tags.
pub const PREFIX: &str = "chaos-z-";
/// Step of every such tag: small, so the hot ones refill often.
const STEP: i64 = 20;
/// How many times one batch is sent before the run gives up (a batch is idempotent).
const ATTEMPTS: u32 = 5;

/// `n` tags with a Zipf-distributed pick among them (rank 0 the hottest).
#[derive(Debug)]
pub struct ManyTags {
    n: usize,
    zipf: Zipf,
}

impl ManyTags {
    /// `n` tags (1 to 10,000,000) and the exponent `s` of the pick (0 to 10).
    pub fn new(n: usize, s: f64) -> anyhow::Result<ManyTags> {
        let zipf = Zipf::new(n, s).map_err(|e| anyhow::anyhow!("{}", e.replace("--zipf-tags", "--tags")))?;
        Ok(ManyTags { n, zipf })
    }

    /// The name of the tag of `rank`.
    pub fn name(&self, rank: usize) -> String {
        format!("{PREFIX}{rank:07}")
    }

    /// A tag drawn with `rng`.
    pub fn pick(&self, rng: &mut impl Rng) -> String {
        self.name(self.zipf.sample(rng))
    }

    /// The hottest tag and, for the checks of `round`, one of the coldest (another each round):
    /// it has most likely never served before, so serving it shows that the tags' creation
    /// survived the faults and that a first allocation works.
    pub fn probes(&self, round: usize) -> [String; 2] {
        [self.name(0), self.name(self.n - 1 - round % self.n)]
    }

    /// Creates every tag through `admin` (the batch API, as many tags per request as it
    /// takes), each batch retried a few times (a retry reports what exists). Returns how
    /// long it took.
    pub async fn create(&self, admin: &Client) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let names: Vec<String> = (0..self.n).map(|r| self.name(r)).collect();
        for chunk in names.chunks(MAX_TAGS_PER_REQUEST) {
            let req = CreateTagsRequest {
                tags: chunk
                    .iter()
                    .map(|t| CreateTagRequest { tag: t.clone(), step: STEP, ..Default::default() })
                    .collect(),
            };
            let mut attempt = 1;
            loop {
                match admin.create_tags(&req).await {
                    Ok(r) if r.created.len() + r.existing.len() == chunk.len() => break,
                    Ok(r) => bail!(
                        "a batch of {} tags answered {} created and {} existing",
                        chunk.len(),
                        r.created.len(),
                        r.existing.len()
                    ),
                    Err(e) if attempt >= ATTEMPTS => bail!("creating tags {}…: {e}", chunk[0]),
                    Err(e) => {
                        eprintln!("leaf-chaos: creating tags {}… (attempt {attempt}): {e}; retrying", chunk[0]);
                        attempt += 1;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        }
        Ok(started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn names_are_fixed_width_and_picks_favour_the_first_ranks() {
        let t = ManyTags::new(100_000, 1.1).unwrap();
        assert_eq!(t.name(42), "chaos-z-0000042");
        assert_eq!(t.probes(0), ["chaos-z-0000000".to_string(), "chaos-z-0099999".to_string()]);
        assert_eq!(t.probes(2)[1], "chaos-z-0099997");
        let mut rng = StdRng::seed_from_u64(7);
        let picks: Vec<String> = (0..10_000).map(|_| t.pick(&mut rng)).collect();
        let hottest = picks.iter().filter(|p| *p == "chaos-z-0000000").count();
        // Rank 0 has weight 1 / H(100000, 1.1) ≈ 1/7.42: about 1,347 of 10,000 picks.
        assert!((1150..1550).contains(&hottest), "{hottest}");
        assert!(picks.iter().all(|p| p.starts_with(PREFIX) && p.len() == PREFIX.len() + 7));
        assert!(ManyTags::new(0, 1.1).unwrap_err().to_string().contains("--tags"));
    }
}
