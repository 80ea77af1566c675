//! sled 0.34.7's log file (`db`) walked the way its recovery reads it, to place damage that
//! sled reports with no offset.
//!
//! sled's open replays its log and stops at the first message that does not check out; when
//! that leaves it short of what its own snapshot says was stable, it fails with a corruption
//! error that carries no offset (`pagecache/snapshot.rs`). The log is segments of
//! `segment_size` bytes (sled's `conf`), each opening with a 20-byte header (a CRC-32 of the
//! rest, then its LSN, each XORed with a constant), then messages one after the other: a header
//! (CRC-32, kind, then its length, segment number and page ID as sled's variable-length
//! integers) and a body, the CRC-32 covering the body and the header after the CRC.
//!
//! [`first_bad_message`] walks the newest segment (the highest LSN whose header checks out),
//! where the replay ends, from its start: the first message there that does not check out is
//! where the replay stopped, unless the replay began after it. Older segments are not judged:
//! a walk of a clean store found messages that do not check out in them, where sled's replay
//! (which starts from its snapshot) never reads. So the place is reported as what it is, the
//! first bad message of the newest segment, not as certain.
//!
//! Read-only and only after sled refused to open: a wrong reading can only misplace the
//! damage, never let a store open.
use std::path::Path;

/// sled's segment header length (`SEG_HEADER_LEN`).
const SEG_HEADER_LEN: usize = 20;
/// The room below which a segment holds no more messages (`MAX_MSG_HEADER_LEN`).
const MAX_MSG_HEADER_LEN: usize = 32;
/// `MessageKind::Corrupted`: zeroes, or a torn write's canary.
const KIND_CORRUPTED: u8 = 0;
/// `MessageKind::Cap`: the padding that seals a segment.
const KIND_CAP: u8 = 2;

/// The offset in `dir/db` of the first message of the newest segment that does not check out;
/// `None` when the files cannot be read as sled 0.34.7's.
pub fn first_bad_message(dir: &Path) -> Option<u64> {
    let conf = std::fs::read(dir.join("conf")).ok()?;
    let seg = segment_size(&conf).filter(|s| *s >= 2 * MAX_MSG_HEADER_LEN + SEG_HEADER_LEN)?;
    let file = std::fs::read(dir.join(crate::durable::LOG_FILE)).ok()?;
    let segments: Vec<(i64, usize)> =
        file.chunks(seg).enumerate().filter_map(|(i, s)| segment_lsn(s).map(|lsn| (lsn, i * seg))).collect();
    let (lsn, base) = segments.into_iter().max()?;
    let expected = u64::try_from(lsn).ok()? / seg as u64;
    let end = (base + seg).min(file.len());
    let mut at = base + SEG_HEADER_LEN;
    while base + seg - at >= MAX_MSG_HEADER_LEN {
        match message(file.get(at..end)?, expected) {
            Some(Message::Cap) => return None,
            Some(Message::Next(len)) => at += len,
            None => return Some(at as u64),
        }
    }
    None
}

/// `segment_size` from sled's config file (lines `key: value`, then a CRC-32).
fn segment_size(conf: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(conf.get(..conf.len().checked_sub(4)?)?).ok()?;
    text.lines().find_map(|l| l.strip_prefix("segment_size: ")?.trim().parse().ok())
}

/// The LSN of the segment starting `seg`, if its header checks out.
fn segment_lsn(seg: &[u8]) -> Option<i64> {
    let header = seg.get(..SEG_HEADER_LEN)?;
    let stored = u32::from_le_bytes(header[0..4].try_into().ok()?) ^ 0xFFFF_FFFF;
    if crc32fast::hash(&header[4..SEG_HEADER_LEN]) != stored {
        return None;
    }
    Some(i64::from_le_bytes(header[4..12].try_into().ok()?) ^ 0x7FFF_FFFF_FFFF_FFFF)
}

enum Message {
    /// A message that checks out, of this many bytes in all.
    Next(usize),
    /// The segment's seal.
    Cap,
}

/// The message at the start of `buf` (the rest of its segment), if it checks out as one of the
/// segment numbered `expected`.
fn message(buf: &[u8], expected: u64) -> Option<Message> {
    let crc = u32::from_le_bytes(buf.get(0..4)?.try_into().ok()?);
    let kind = *buf.get(4)?;
    let mut at = 5;
    let mut next = || {
        let (v, n) = varint(buf.get(at..)?)?;
        at += n;
        Some(v)
    };
    let (len, number, _pid) = (next()?, next()?, next()?);
    let body = buf.get(at..at.checked_add(usize::try_from(len).ok()?)?)?;
    if kind == KIND_CORRUPTED {
        return None;
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(body);
    hasher.update(&buf[4..at]);
    if hasher.finalize() ^ 0xFFFF_FFFF != crc || number != expected {
        return None;
    }
    Some(if kind == KIND_CAP { Message::Cap } else { Message::Next(at + body.len()) })
}

/// sled's variable-length `u64` at the start of `buf`, and its length.
fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    Some(match first {
        0..=240 => (u64::from(first), 1),
        241..=248 => (240 + 256 * (u64::from(first) - 241) + u64::from(*buf.get(1)?), 2),
        249 => (2288 + 256 * u64::from(*buf.get(1)?) + u64::from(*buf.get(2)?), 3),
        other => {
            let n = usize::from(other) - 247;
            let mut bytes = [0u8; 8];
            bytes[..n].copy_from_slice(buf.get(1..=n)?);
            (u64::from_le_bytes(bytes), n + 1)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sled's own encodings of a few values (`serialization.rs`), read back.
    #[test]
    fn varints_read_as_sled_writes_them() {
        assert_eq!(varint(&[7]), Some((7, 1)));
        assert_eq!(varint(&[241, 10]), Some((250, 2)));
        assert_eq!(varint(&[249, 1, 2]), Some((2288 + 256 + 2, 3)));
        assert_eq!(varint(&[250, 1, 0, 1]), Some((0x01_0001, 4)));
        assert_eq!(varint(&[255, 1, 0, 0, 0, 0, 0, 0, 1]), Some((0x0100_0000_0000_0001, 9)));
        assert_eq!(varint(&[250, 1]), None);
    }

    /// A log sled wrote walks clean up to the end of its newest segment (where writing
    /// stopped); a byte flipped in a message there is found in that message.
    #[test]
    fn a_flip_in_the_newest_segment_is_found_in_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let newest = |path: &Path| {
            let file = std::fs::read(path.join("db")).unwrap();
            let seg = segment_size(&std::fs::read(path.join("conf")).unwrap()).unwrap();
            file.chunks(seg).enumerate().filter_map(|(i, s)| segment_lsn(s).map(|l| (l, i * seg))).max().unwrap().1
                as u64
        };
        // Writes until the newest segment holds 4 KiB of messages that walk clean.
        let base = {
            let db = sled::open(dir.path()).unwrap();
            let mut i = 0u32;
            loop {
                for _ in 0..1_000 {
                    db.insert(i.to_be_bytes(), vec![(i % 251) as u8; 100]).unwrap();
                    i += 1;
                }
                // Only so that this process reads the bytes back from the file (the page cache):
                // nothing here needs them on disk.
                db.flush().unwrap();
                let (base, end) = (newest(dir.path()), first_bad_message(dir.path()).unwrap());
                assert!(end > base, "the newest segment's walk ended at {end}, before it began at {base}");
                if end >= base + 4096 {
                    break base;
                }
                assert!(i < 200_000, "the newest segment never held 4 KiB that walk clean");
            }
        };
        assert_eq!(segment_size(&std::fs::read(dir.path().join("conf")).unwrap()), Some(512 * 1024));
        let offset = base + 2048;
        crate::failpoint::flip_bytes(&dir.path().join("db"), offset, 1).unwrap();
        let found = first_bad_message(dir.path()).expect("the flip was not found");
        assert!(found <= offset && offset - found < 2048, "flip at {offset}, found at {found}");
    }
}
