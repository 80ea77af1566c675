//! The snapshot file: the `sm` tree's key-value pairs as of one log ID, streamed, so a
//! snapshot has no size limit but the disk and is never held whole in memory to be encoded.
//!
//! ```text
//! "LEAFSNP2"                                   magic and layout version
//! u32 LE length, codec(SnapshotMeta)           the header
//! { u32 LE key length (> 0), key,              a pair of the `sm` tree, in key order; each
//!   u32 LE value length, value }*              value a codec record (checksummed itself)
//! u32 LE 0                                     the end of the pairs
//! u64 LE pairs, u32 LE crc32                   the count, and a CRC-32 of every byte before it
//! ```
//!
//! A reader hands each pair to its caller as it goes, but the file is only good once the
//! trailer checked out ([`read`] returns an error otherwise): the caller keeps what it read
//! apart until then, so a truncated or corrupted file changes nothing. Lengths are bounded
//! before anything is allocated for them.
use std::io::{self, Read, Write};

use leaf_api::codec;

use crate::types::SnapshotMeta;

/// The first bytes of a snapshot file of this layout. Snapshot data of earlier releases is one
/// codec record, whose first byte is the codec's version (1), so the two never mix up.
pub(super) const MAGIC: &[u8; 8] = b"LEAFSNP2";

/// The longest key of the `sm` tree: a prefix and a tag name, with room to spare.
const MAX_KEY_BYTES: u32 = 1024;

/// The longest value: one codec record.
const MAX_VALUE_BYTES: u32 = (codec::MAX_PAYLOAD + 64) as u32;

/// The longest header: a snapshot meta with its membership of at most a handful of nodes.
const MAX_HEADER_BYTES: u32 = 1024 * 1024;

/// Why a snapshot file cannot be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum FileError {
    #[error("reading the snapshot: {0}")]
    Io(#[from] io::Error),
    #[error("not a snapshot file of this layout (magic {0:02x?})")]
    Magic([u8; 8]),
    #[error("a {what} of {len} bytes is longer than the {max} a snapshot may hold")]
    TooLong { what: &'static str, len: u32, max: u32 },
    #[error("the snapshot's header: {0}")]
    Header(codec::CodecError),
    #[error("the snapshot ends after {read} pairs, {claimed} claimed")]
    Count { read: u64, claimed: u64 },
    #[error("the snapshot's checksum does not match (file {stored:08x}, computed {computed:08x})")]
    Checksum { stored: u32, computed: u32 },
    #[error("the snapshot has bytes after its trailer")]
    Trailing,
    #[error("a pair of the snapshot: {0}")]
    Pair(String),
}

/// Writes a snapshot file to `W`, pair by pair.
pub(super) struct Writer<W: Write> {
    out: W,
    crc: crc32fast::Hasher,
    pairs: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a file for the snapshot `meta`: writes the magic and the header.
    pub(super) fn new(out: W, meta: &SnapshotMeta) -> io::Result<Self> {
        let header = codec::encode(meta).map_err(io::Error::other)?;
        let mut w = Writer { out, crc: crc32fast::Hasher::new(), pairs: 0 };
        w.put(MAGIC)?;
        w.put(&len32(header.len(), MAX_HEADER_BYTES)?.to_le_bytes())?;
        w.put(&header)?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.out.write_all(bytes)
    }

    /// Appends one pair of the `sm` tree. The key must not be empty.
    pub(super) fn pair(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        if key.is_empty() {
            return Err(io::Error::other("an empty key cannot be written to a snapshot"));
        }
        self.put(&len32(key.len(), MAX_KEY_BYTES)?.to_le_bytes())?;
        self.put(key)?;
        self.put(&len32(value.len(), MAX_VALUE_BYTES)?.to_le_bytes())?;
        self.put(value)?;
        self.pairs += 1;
        Ok(())
    }

    /// Writes the trailer and returns the output (not flushed or synced: the caller does).
    pub(super) fn finish(mut self) -> io::Result<W> {
        self.put(&0u32.to_le_bytes())?;
        let crc = self.crc.clone().finalize();
        self.out.write_all(&self.pairs.to_le_bytes())?;
        self.out.write_all(&crc.to_le_bytes())?;
        Ok(self.out)
    }
}

/// `n` as a `u32` no greater than `max`.
fn len32(n: usize, max: u32) -> io::Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(|| io::Error::other(format!("{n} bytes is more than a snapshot record may hold ({max})")))
}

/// Reads `R` while checksumming what it read.
struct Checked<R> {
    inner: R,
    crc: crc32fast::Hasher,
}

impl<R: Read> Checked<R> {
    fn exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact(buf)?;
        self.crc.update(buf);
        Ok(())
    }

    fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0; 4];
        self.exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// A length-prefixed field of at most `max` bytes, into `buf`.
    fn field(&mut self, what: &'static str, max: u32, buf: &mut Vec<u8>) -> Result<(), FileError> {
        let len = self.u32()?;
        if len > max {
            return Err(FileError::TooLong { what, len, max });
        }
        buf.resize(len as usize, 0);
        self.exact(buf)?;
        Ok(())
    }
}

/// Whether `first` (a snapshot's first bytes) begins a file of this layout.
pub(super) fn is_current(first: &[u8]) -> bool {
    first.starts_with(MAGIC)
}

/// Reads a whole snapshot file from `input`, handing each pair to `pair` in file order, and
/// returns its meta once the trailer checked out. An error from `pair` stops the read.
pub(super) fn read<R: Read>(
    mut input: R,
    pair: impl FnMut(&[u8], &[u8]) -> Result<(), String>,
) -> Result<SnapshotMeta, FileError> {
    let meta = read_section(&mut input, pair)?;
    if input.read(&mut [0; 1])? != 0 {
        return Err(FileError::Trailing);
    }
    Ok(meta)
}

/// Like [`read`], but stops right after the trailer: the snapshot is a section of a larger
/// file (a backup), whose reader goes on from there.
pub(super) fn read_section<R: Read>(
    input: R,
    mut pair: impl FnMut(&[u8], &[u8]) -> Result<(), String>,
) -> Result<SnapshotMeta, FileError> {
    let mut r = Checked { inner: input, crc: crc32fast::Hasher::new() };
    let mut magic = [0; 8];
    r.exact(&mut magic)?;
    if !is_current(&magic) {
        return Err(FileError::Magic(magic));
    }
    let mut header = Vec::new();
    r.field("header", MAX_HEADER_BYTES, &mut header)?;
    let meta: SnapshotMeta = codec::decode(&header).map_err(FileError::Header)?;
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut pairs = 0u64;
    loop {
        r.field("key", MAX_KEY_BYTES, &mut key)?;
        if key.is_empty() {
            break;
        }
        r.field("value", MAX_VALUE_BYTES, &mut value)?;
        pair(&key, &value).map_err(FileError::Pair)?;
        pairs += 1;
    }
    let computed = r.crc.clone().finalize();
    let (mut count, mut crc) = ([0; 8], [0; 4]);
    r.inner.read_exact(&mut count)?;
    r.inner.read_exact(&mut crc)?;
    let (claimed, stored) = (u64::from_le_bytes(count), u32::from_le_bytes(crc));
    if stored != computed {
        return Err(FileError::Checksum { stored, computed });
    }
    if claimed != pairs {
        return Err(FileError::Count { read: pairs, claimed });
    }
    Ok(meta)
}

/// Counts the bytes read through it, for [`verify`] to say where it stopped.
struct Counted<R> {
    inner: R,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Reads a whole snapshot file and checks every value's own checksum as well as the file's:
/// `Err` is the offset at which the damage was found (the start of a damaged value, or where
/// reading stopped) and why. Returns the number of pairs.
pub(super) fn verify<R: Read>(input: R) -> Result<u64, (u64, String)> {
    let consumed = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut pairs = 0;
    let mut bad_value = None;
    let counted = Counted { inner: input, read: consumed.clone() };
    let result = read(counted, |_, v| {
        codec::check(v).map_err(|e| {
            bad_value = Some(consumed.get() - v.len() as u64 + e.offset() as u64);
            format!("a value fails its own check: {e}")
        })?;
        pairs += 1;
        Ok(())
    });
    match result {
        Ok(_) => Ok(pairs),
        Err(e) => Err((bad_value.unwrap_or(consumed.get()), e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> SnapshotMeta {
        SnapshotMeta { snapshot_id: "1-2-3".into(), ..SnapshotMeta::default() }
    }

    fn file(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), &meta()).unwrap();
        for (k, v) in pairs {
            w.pair(k, v).unwrap();
        }
        w.finish().unwrap()
    }

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn read_all(bytes: &[u8]) -> Result<(SnapshotMeta, Pairs), FileError> {
        let mut got = Vec::new();
        let meta = read(bytes, |k, v| {
            got.push((k.to_vec(), v.to_vec()));
            Ok(())
        })?;
        Ok((meta, got))
    }

    #[test]
    fn pairs_come_back_in_order_with_the_meta() {
        let bytes = file(&[(b"a", b"1"), (b"b/x", b""), (b"c", &[7; 3000])]);
        let (m, pairs) = read_all(&bytes).unwrap();
        assert_eq!(m, meta());
        let keys: Vec<&[u8]> = pairs.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, [b"a".as_slice(), b"b/x", b"c"]);
        assert_eq!(pairs[2].1, vec![7; 3000]);
        assert!(read_all(&file(&[])).unwrap().1.is_empty());
    }

    /// Every truncation, every flipped byte and every appended byte is refused.
    #[test]
    fn a_damaged_file_is_refused() {
        let bytes = file(&[(b"t/a", b"one"), (b"t/b", b"two")]);
        for len in 0..bytes.len() {
            assert!(read_all(&bytes[..len]).is_err(), "truncated to {len} bytes");
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(read_all(&bad).is_err(), "byte {i} flipped");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(read_all(&longer), Err(FileError::Trailing)));
    }

    /// `verify` finds a flip anywhere, and inside a value it names the value's damaged field.
    #[test]
    fn verify_locates_the_damage() {
        let (one, two) = (codec::encode(&1u64).unwrap(), codec::encode(&"two").unwrap());
        let bytes = file(&[(b"t/a", &one), (b"t/b", &two)]);
        assert_eq!(verify(bytes.as_slice()), Ok(2));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            let (offset, why) = verify(bad.as_slice()).unwrap_err();
            assert!(offset <= bytes.len() as u64, "byte {i}: offset {offset}");
            if let Some(at) = find(&bytes, &two).filter(|at| (at + 1..at + two.len()).contains(&i)) {
                assert_eq!(offset, at as u64 + 1, "byte {i} of the second value: {why}");
            }
        }
        assert_eq!(verify(&bytes[..30]).unwrap_err().0, 30);
    }

    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }

    /// A length beyond its bound is refused before anything is allocated for it.
    #[test]
    fn a_huge_length_is_refused_unread() {
        let mut bytes = file(&[]);
        let end = bytes.len() - 16; // the end marker, then the trailer
        bytes.truncate(end);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(read_all(&bytes), Err(FileError::TooLong { what: "key", .. })));
    }

    #[test]
    fn an_empty_key_cannot_be_written() {
        let mut w = Writer::new(Vec::new(), &meta()).unwrap();
        assert!(w.pair(b"", b"v").is_err());
    }
}
