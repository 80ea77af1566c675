//! `{zipf}` in `leaf bench --path`: a rank per request, drawn from a Zipf distribution over
//! `1..=n` with exponent `s` (rank k has weight 1 / k^s), by inverse transform on a table of
//! the cumulative weights (8 bytes a rank: a million ranks take 8 MB, built once). The rank
//! is written zero-padded to the width of `n - 1` and counted from 0, like the names
//! `leaf tag create-batch` files usually hold (`t-000000` … `t-999999`), so rank 0 is the
//! hottest.
use rand::Rng;

/// Placeholder in `--path` replaced by a Zipf-distributed rank per request.
pub(crate) const ZIPF: &str = "{zipf}";

/// A Zipf distribution over `0..n`.
#[derive(Debug, Clone)]
pub struct Zipf {
    /// Cumulative weights, normalised: `cdf[k]` is the probability of a rank `<= k`.
    cdf: Vec<f64>,
    width: usize,
}

impl Zipf {
    /// Ranks `0..n` (at least 1, at most 10,000,000) with exponent `s` (0 is uniform; above 0
    /// the first ranks dominate; at most 10).
    pub fn new(n: usize, s: f64) -> Result<Zipf, String> {
        if !(1..=10_000_000).contains(&n) {
            return Err(format!("--zipf-tags must be from 1 to 10000000, got {n}"));
        }
        if !(0.0..=10.0).contains(&s) {
            return Err(format!("--zipf-s must be from 0 to 10, got {s}"));
        }
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 1..=n {
            total += (k as f64).powf(-s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        let width = (n - 1).max(1).to_string().len();
        Ok(Zipf { cdf, width })
    }

    /// A rank drawn with `rng`.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.gen();
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }

    /// `path` with every `{zipf}` replaced by a rank drawn with `rng`, zero-padded.
    pub fn fill(&self, path: &str, rng: &mut impl Rng) -> String {
        let rank = format!("{:0width$}", self.sample(rng), width = self.width);
        path.replace(ZIPF, &rank)
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn ranks_follow_the_exponent_and_pad_to_the_widest() {
        let z = Zipf::new(1000, 1.1).unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = vec![0u32; 1000];
        for _ in 0..200_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        // P(0) / P(1) = 2^1.1 ≈ 2.14; rank 0 takes about 1/H(1000, 1.1) ≈ 19% of the draws.
        let ratio = f64::from(counts[0]) / f64::from(counts[1]);
        assert!((1.9..2.4).contains(&ratio), "{ratio}");
        assert!((0.17..0.21).contains(&(f64::from(counts[0]) / 200_000.0)), "{}", counts[0]);
        assert!(counts[999] > 0 && counts[999] < counts[500]);
        assert_eq!(
            z.fill("/api/segment/get/t-{zipf}", &mut StdRng::seed_from_u64(1)).len(),
            "/api/segment/get/t-".len() + 3
        );
        // Uniform at s = 0; one rank; bounds.
        let u = Zipf::new(4, 0.0).unwrap();
        let mut c = [0u32; 4];
        for _ in 0..40_000 {
            c[u.sample(&mut rng)] += 1;
        }
        assert!(c.iter().all(|n| (9_000..11_000).contains(n)), "{c:?}");
        assert_eq!(Zipf::new(1, 1.1).unwrap().fill("{zipf}", &mut rng), "0");
        assert!(Zipf::new(0, 1.0).is_err() && Zipf::new(10, -1.0).is_err() && Zipf::new(10, f64::NAN).is_err());
    }
}
