//! The single place where records are turned into bytes and back.
//!
//! Every record is wrapped in an envelope:
//!
//! ```text
//! +---------+-----------------+------------------------------+
//! | version | crc32 (LE, u32) | bincode 2 (standard config)  |
//! | 1 byte  | 4 bytes         | payload                      |
//! +---------+-----------------+------------------------------+
//! ```
//!
//! The CRC covers the version byte and the payload, so a torn or bit-flipped record is reported
//! as [`CodecError::Checksum`] instead of being decoded into garbage. The version byte lets a
//! later release read records written by this one; decoding an unknown version is an error,
//! never a guess.
use serde::{de::DeserializeOwned, Serialize};

/// Version of the envelope and payload layout written by this build.
pub const FORMAT_VERSION: u8 = 1;

/// Largest payload accepted when decoding (64 MiB). Bounds the memory a corrupt or hostile
/// length prefix can make the decoder allocate.
pub const MAX_PAYLOAD: usize = 64 * 1024 * 1024;

pub const HEADER: usize = 5;

/// Why a record could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("record too short: {0} bytes")]
    Truncated(usize),
    #[error("unsupported record version {found} (this build reads version {FORMAT_VERSION})")]
    Version { found: u8 },
    #[error("record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("record payload of {0} bytes exceeds the {MAX_PAYLOAD}-byte limit")]
    TooLarge(usize),
    #[error("encode: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    #[error("decode: {0}")]
    Decode(#[from] bincode::error::DecodeError),
    #[error("record has {0} trailing bytes after the payload")]
    Trailing(usize),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_PAYLOAD>()
}

fn checksum(version: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[version]);
    h.update(payload);
    h.finalize()
}

/// Encodes `value` into a versioned, checksummed record.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![0u8; HEADER];
    bincode::serde::encode_into_std_write(value, &mut out, config())?;
    let payload_len = out.len() - HEADER;
    if payload_len > MAX_PAYLOAD {
        return Err(CodecError::TooLarge(payload_len));
    }
    let crc = checksum(FORMAT_VERSION, &out[HEADER..]);
    out[0] = FORMAT_VERSION;
    out[1..HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Checks a record's envelope (length, version, checksum) without decoding its payload: what
/// a scan for damage needs. [`decode`] checks the same first.
pub fn check(bytes: &[u8]) -> Result<(), CodecError> {
    payload(bytes).map(|_| ())
}

/// Decodes a record written by [`encode`], checking version and checksum first.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let payload = payload(bytes)?;
    let (value, used) = bincode::serde::decode_from_slice(payload, config())?;
    if used != payload.len() {
        return Err(CodecError::Trailing(payload.len() - used));
    }
    Ok(value)
}

impl CodecError {
    /// Where in the record the damage was found: the byte offset of the field that failed.
    pub fn offset(&self) -> usize {
        match self {
            CodecError::Truncated(len) => *len,
            CodecError::Version { .. } => 0,
            CodecError::Checksum { .. } => 1,
            CodecError::TooLarge(_) | CodecError::Encode(_) | CodecError::Decode(_) | CodecError::Trailing(_) => HEADER,
        }
    }
}

/// The payload of a record whose envelope checks out.
fn payload(bytes: &[u8]) -> Result<&[u8], CodecError> {
    if bytes.len() < HEADER {
        return Err(CodecError::Truncated(bytes.len()));
    }
    let version = bytes[0];
    if version != FORMAT_VERSION {
        return Err(CodecError::Version { found: version });
    }
    let stored = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    let payload = &bytes[HEADER..];
    if payload.len() > MAX_PAYLOAD {
        return Err(CodecError::TooLarge(payload.len()));
    }
    let computed = checksum(version, payload);
    if stored != computed {
        return Err(CodecError::Checksum { stored, computed });
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Rec {
        a: i64,
        b: Option<String>,
        c: Vec<u8>,
    }

    fn sample() -> Rec {
        Rec { a: -7, b: Some("tag".into()), c: vec![1, 2, 3] }
    }

    #[test]
    fn round_trip() {
        let bytes = encode(&sample()).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(decode::<Rec>(&bytes).unwrap(), sample());
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let bytes = encode(&sample()).unwrap();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(decode::<Rec>(&b).is_err(), "flip of byte {i} bit {bit} went unnoticed");
            }
        }
    }

    /// `check` refuses what `decode` refuses for its envelope, and says where.
    #[test]
    fn check_finds_every_flip_and_names_its_field() {
        let bytes = encode(&sample()).unwrap();
        check(&bytes).unwrap();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x04;
            let e = check(&b).unwrap_err();
            assert_eq!(e.offset(), if i == 0 { 0 } else { 1 }, "byte {i}: {e}");
        }
        assert_eq!(check(&bytes[..3]).unwrap_err().offset(), 3);
    }

    #[test]
    fn truncation_and_unknown_version_are_errors() {
        let bytes = encode(&sample()).unwrap();
        assert!(matches!(decode::<Rec>(&bytes[..3]), Err(CodecError::Truncated(3))));
        assert!(decode::<Rec>(&bytes[..bytes.len() - 1]).is_err());
        let mut b = bytes.clone();
        b[0] = 9;
        assert!(matches!(decode::<Rec>(&b), Err(CodecError::Version { found: 9 })));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut bytes = encode(&1u8).unwrap();
        bytes.push(0);
        let crc = checksum(FORMAT_VERSION, &bytes[HEADER..]);
        bytes[1..HEADER].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode::<u8>(&bytes), Err(CodecError::Trailing(1))));
    }
}
