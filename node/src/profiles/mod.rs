//! How the node serves the per-tag ID profiles beyond plain segments (the profiles themselves
//! are `leaf_api::profile`; their stored form and allocation rules `leaf_raft_store::profile`;
//! the monotonic leader path is here too, as a hook of `crate::raft::hooks`).
//!
//! Layout:
//! - this file: key generation for obfuscated tags;
//! - [`obfuscate`]: the keyed bijection of an obfuscated tag's ID space, and what it hides;
//! - [`monotonic`]: strictly increasing IDs, served by the leader from windows committed ahead
//!   of use, each answer confirmed by a quorum round.
pub mod monotonic;
pub mod obfuscate;

use leaf_api::ErrorCode;
use leaf_raft_store::OBFUSCATION_KEY_BYTES;
use rand::RngCore;

use crate::error::ApiError;

/// A fresh key for an obfuscated tag, from the operating system's random source.
pub fn new_key() -> Result<[u8; OBFUSCATION_KEY_BYTES], ApiError> {
    let mut key = [0u8; OBFUSCATION_KEY_BYTES];
    rand::rngs::OsRng.try_fill_bytes(&mut key).map_err(|e| {
        tracing::error!(error = %e, "no random bytes for an obfuscation key");
        ApiError::new(ErrorCode::Unavailable, "the node could not generate a key: no random source")
    })?;
    Ok(key)
}
