//! The keyed bijection of an `obfuscated` tag: a sequence number `n` in `[0, domain)` becomes an
//! ID in `[0, domain)` that reveals neither `n` nor the order of the IDs to anyone without the
//! tag's key; [`Obfuscator::decode`] inverts it (admin only).
//!
//! **Construction.** A balanced Feistel network of [`ROUNDS`] rounds over `2h` bits, with `2h`
//! the smallest even width holding `domain − 1` (at least 8 bits), whose round function is
//! SipHash-2-4 (a keyed pseudorandom function, from the `siphasher` crate) of the round number
//! and the right half, with the tag's 32-byte key split into two 128-bit SipHash keys used in
//! alternate rounds. A Feistel network is a permutation of `2h`-bit values whatever its round
//! function; *cycle-walking* (applying it again while the value is `>= domain`) turns it into a
//! permutation of `[0, domain)`, and since `2^(2h) < 4 · domain`, a value takes fewer than four
//! applications on average. Everything is integer arithmetic on fixed inputs: the same key and
//! domain give the same IDs on every node and every release (a known-answer test pins it).
//!
//! **What we claim.** Unique IDs by construction (a bijection of a counter that is itself
//! allocated without overlap through Raft). To an observer without the key, IDs look like
//! random distinct numbers below `domain`: consecutive sequence numbers give unrelated IDs, so
//! neither the count of IDs issued in a period nor their order can be read from them, as far as
//! a Feistel network with a pseudorandom round function hides them (Luby–Rackoff: with at least
//! four rounds it is a pseudorandom permutation; with 32-bit halves the proven bound weakens
//! after about 2^16 observed IDs, and more rounds push the known attacks further; we use 10).
//!
//! **What we do not claim.** Not encryption of secrets, not authentication: anyone can present
//! any number, and a valid-looking one proves nothing (check it against your own records).
//! Not a standardised cipher (NIST's FF1/FF3-1 are the format-preserving standards; this is
//! the same Feistel-plus-cycle-walking shape with SipHash as the round function). The domain
//! is public (2^63, or the tag's upper bound + 1), and so is the fact that the IDs fill it
//! uniformly. Whoever holds the key (every node's Raft state and log, their backups) can
//! decode every ID: protect the data directories as you would the key. Decoding time varies
//! with the value (cycle-walking): decode is admin-only.
use std::hash::Hasher;

use siphasher::sip::SipHasher24;

/// Feistel rounds.
pub const ROUNDS: u8 = 10;
/// Narrowest Feistel width, in bits (so tiny domains still get a real permutation).
const MIN_BITS: u32 = 8;
/// Largest domain: every non-negative `i64`.
pub const MAX_DOMAIN: u64 = 1 << 63;

/// Why a value could not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObfuscateError {
    #[error("an obfuscated tag's ID space must hold 2 to 2^63 values, got {0}")]
    Domain(u64),
    #[error("{value} is outside the tag's ID space [0, {domain})")]
    OutOfDomain { value: u64, domain: u64 },
}

/// A tag's keyed bijection of `[0, domain)`.
#[derive(Clone)]
pub struct Obfuscator {
    keys: [[u8; 16]; 2],
    domain: u64,
    /// Bits of each Feistel half.
    half: u32,
}

impl std::fmt::Debug for Obfuscator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Obfuscator").field("domain", &self.domain).field("key", &"<redacted>").finish()
    }
}

impl Obfuscator {
    /// The bijection of `[0, domain)` under `key`.
    pub fn new(key: &[u8; 32], domain: u64) -> Result<Self, ObfuscateError> {
        if !(2..=MAX_DOMAIN).contains(&domain) {
            return Err(ObfuscateError::Domain(domain));
        }
        let bits = (64 - (domain - 1).leading_zeros()).max(MIN_BITS);
        let mut keys = [[0u8; 16]; 2];
        keys[0].copy_from_slice(&key[..16]);
        keys[1].copy_from_slice(&key[16..]);
        Ok(Obfuscator { keys, domain, half: bits.div_ceil(2) })
    }

    /// The ID of sequence number `n`.
    pub fn encode(&self, n: u64) -> Result<u64, ObfuscateError> {
        self.check(n)?;
        let mut x = self.permute(n);
        while x >= self.domain {
            x = self.permute(x);
        }
        Ok(x)
    }

    /// The sequence number of ID `id`.
    pub fn decode(&self, id: u64) -> Result<u64, ObfuscateError> {
        self.check(id)?;
        let mut x = self.unpermute(id);
        while x >= self.domain {
            x = self.unpermute(x);
        }
        Ok(x)
    }

    fn check(&self, v: u64) -> Result<(), ObfuscateError> {
        if v >= self.domain {
            return Err(ObfuscateError::OutOfDomain { value: v, domain: self.domain });
        }
        Ok(())
    }

    fn mask(&self) -> u64 {
        (1u64 << self.half) - 1
    }

    fn round(&self, r: u8, half: u64) -> u64 {
        let mut h = SipHasher24::new_with_key(&self.keys[usize::from(r & 1)]);
        h.write_u8(r);
        h.write_u64(half);
        h.finish() & self.mask()
    }

    /// The Feistel permutation of `2 · half`-bit values.
    fn permute(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half, x & self.mask());
        for i in 0..ROUNDS {
            (l, r) = (r, l ^ self.round(i, r));
        }
        (l << self.half) | r
    }

    /// The inverse of [`Obfuscator::permute`].
    fn unpermute(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half, x & self.mask());
        for i in (0..ROUNDS).rev() {
            (l, r) = (r ^ self.round(i, l), l);
        }
        (l << self.half) | r
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    fn key(seed: u8) -> [u8; 32] {
        std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
    }

    /// Pinned outputs: a change here changes every obfuscated ID a cluster would hand out, so
    /// nodes of different releases would disagree (and could collide). Never update it.
    #[test]
    fn known_answers_never_change() {
        let o = Obfuscator::new(&key(7), MAX_DOMAIN).unwrap();
        let got: Vec<u64> = (0..4).map(|n| o.encode(n).unwrap()).collect();
        assert_eq!(got, KNOWN, "the bijection changed: obfuscated IDs would differ between releases");
    }
    const KNOWN: [u64; 4] = [2499986683200342791, 7416157560479506797, 973190640238421154, 1043373762783938759];

    #[test]
    fn small_domains_are_exact_permutations() {
        for domain in [2, 3, 255, 256, 257, 1000, 1 << 16, 1_000_003 / 10] {
            let o = Obfuscator::new(&key(1), domain).unwrap();
            let mut seen = HashSet::new();
            for n in 0..domain {
                let x = o.encode(n).unwrap();
                assert!(x < domain && seen.insert(x), "domain {domain}: {n} -> {x} repeated or outside");
                assert_eq!(o.decode(x).unwrap(), n);
            }
        }
    }

    #[test]
    fn a_million_consecutive_sequence_numbers_never_collide() {
        let o = Obfuscator::new(&key(3), MAX_DOMAIN).unwrap();
        let start = 1u64 << 40;
        let mut seen = HashSet::with_capacity(1_000_000);
        for n in start..start + 1_000_000 {
            assert!(seen.insert(o.encode(n).unwrap()), "collision at {n}");
        }
    }

    #[test]
    fn outputs_are_not_ordered() {
        let o = Obfuscator::new(&key(5), MAX_DOMAIN).unwrap();
        let ids: Vec<u64> = (1..=10_001).map(|n| o.encode(n).unwrap()).collect();
        let up = ids.windows(2).filter(|w| w[0] < w[1]).count();
        assert!((4_000..=6_000).contains(&up), "{up} of 10,000 adjacent pairs increase");
    }

    #[test]
    fn keys_matter_and_are_never_printed() {
        let a = Obfuscator::new(&key(1), MAX_DOMAIN).unwrap();
        let b = Obfuscator::new(&key(2), MAX_DOMAIN).unwrap();
        assert_ne!(
            (1..20).map(|n| a.encode(n).unwrap()).collect::<Vec<_>>(),
            (1..20).map(|n| b.encode(n).unwrap()).collect::<Vec<_>>()
        );
        let shown = format!("{a:?}");
        assert!(shown.contains("<redacted>") && !shown.contains('['), "{shown}");
    }

    #[test]
    fn bad_domains_and_values_are_typed_errors() {
        for d in [0, 1, MAX_DOMAIN + 1, u64::MAX] {
            assert_eq!(Obfuscator::new(&key(1), d).unwrap_err(), ObfuscateError::Domain(d));
        }
        let o = Obfuscator::new(&key(1), 1000).unwrap();
        assert!(matches!(o.encode(1000), Err(ObfuscateError::OutOfDomain { value: 1000, domain: 1000 })));
        assert!(matches!(o.decode(5000), Err(ObfuscateError::OutOfDomain { .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]
        #[test]
        fn decode_inverts_encode(seed in any::<u8>(), n in any::<u64>(), which in 0usize..3) {
            let domain = [MAX_DOMAIN, 1 << 53, 1_000_003][which];
            let o = Obfuscator::new(&key(seed), domain).unwrap();
            let n = n % domain;
            let x = o.encode(n).unwrap();
            prop_assert!(x < domain);
            prop_assert_eq!(o.decode(x).unwrap(), n);
        }
    }
}
