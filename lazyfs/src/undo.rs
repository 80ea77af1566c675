//! The undo log of one file's content: what a power cut must take back.
//!
//! A file's durable state is its content at its last sync: `synced_len` bytes. Every byte below
//! `synced_len` that an operation changes since then is saved once, with its synced value, the
//! first time it is changed (later changes of the same byte need nothing more: the value to bring
//! back is still the synced one). Bytes at or beyond `synced_len` need nothing saved: a revert
//! truncates them away. A revert writes the saved bytes back and sets the length to `synced_len`.
//!
//! Why saving at the first change is enough: a byte below `synced_len` that was never changed since
//! the sync still holds its synced value, and it is still inside the file (shrinking the file below
//! `synced_len` is a change of the bytes cut off, which saves them). So whatever is read before the
//! first change is the synced value.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;

/// Where a file's bytes are read from and written back to: a real [`File`], or a model in tests.
pub(crate) trait Content {
    /// Reads up to `len` bytes at `offset`; fewer only at the end of the file.
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>>;
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    fn set_len(&mut self, len: u64) -> io::Result<()>;
}

impl Content for File {
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        let mut done = 0;
        while done < len {
            match FileExt::read_at(self, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.write_all_at(bytes, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
}

/// What a revert took back from one file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reverted {
    /// Synced bytes written back over changes.
    pub restored: u64,
    /// Bytes beyond the synced length cut off.
    pub truncated: u64,
}

/// The undo log of one file since its last sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileUndo {
    synced_len: u64,
    /// Disjoint, non-adjacent extents of synced bytes, by offset; all below `synced_len`.
    saved: BTreeMap<u64, Vec<u8>>,
}

impl FileUndo {
    /// The log of a file whose current content is the synced one, `synced_len` bytes long.
    pub(crate) fn new(synced_len: u64) -> Self {
        FileUndo { synced_len, saved: BTreeMap::new() }
    }

    pub(crate) fn synced_len(&self) -> u64 {
        self.synced_len
    }

    /// How many synced bytes are saved.
    pub(crate) fn saved_bytes(&self) -> u64 {
        self.saved.values().map(|v| v.len() as u64).sum()
    }

    /// The parts of `offset..offset + len` below the synced length that are not saved yet.
    pub(crate) fn missing(&self, offset: u64, len: u64) -> Vec<Range<u64>> {
        let end = offset.saturating_add(len).min(self.synced_len);
        let mut gaps = Vec::new();
        if offset >= end {
            return gaps;
        }
        let mut cursor = offset;
        if let Some((&start, bytes)) = self.saved.range(..=offset).next_back() {
            cursor = cursor.max(start + bytes.len() as u64);
        }
        for (&start, bytes) in self.saved.range(offset..end) {
            if cursor < start {
                gaps.push(cursor..start);
            }
            cursor = cursor.max(start + bytes.len() as u64);
        }
        if cursor < end {
            gaps.push(cursor..end);
        }
        gaps
    }

    /// Saves the synced bytes of the parts of `offset..offset + len` not saved yet, reading them
    /// from `content`: call it before changing those bytes. Returns how many bytes it saved.
    pub(crate) fn record(&mut self, content: &impl Content, offset: u64, len: u64) -> io::Result<u64> {
        let mut saved = 0;
        for gap in self.missing(offset, len) {
            let want = (gap.end - gap.start) as usize;
            let mut bytes = content.read_at(gap.start, want)?;
            // Only a file changed behind the log's back is shorter: keep the extent whole.
            bytes.resize(want, 0);
            saved += want as u64;
            self.insert(gap.start, bytes);
        }
        Ok(saved)
    }

    /// Inserts an extent that overlaps no saved one, merging it with adjacent ones.
    fn insert(&mut self, offset: u64, mut bytes: Vec<u8>) {
        let end = offset + bytes.len() as u64;
        if let Some(next) = self.saved.remove(&end) {
            bytes.extend_from_slice(&next);
        }
        if let Some((&start, prev)) = self.saved.range_mut(..offset).next_back() {
            if start + prev.len() as u64 == offset {
                prev.extend_from_slice(&bytes);
                return;
            }
        }
        self.saved.insert(offset, bytes);
    }

    /// Brings `content` back to its synced state.
    pub(crate) fn revert(&self, content: &mut impl Content) -> io::Result<Reverted> {
        let len = content.len()?;
        let mut restored = 0;
        for (&offset, bytes) in &self.saved {
            content.write_at(offset, bytes)?;
            restored += bytes.len() as u64;
        }
        content.set_len(self.synced_len)?;
        Ok(Reverted { restored, truncated: len.saturating_sub(self.synced_len) })
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A file in memory.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Model(Vec<u8>);

    impl Content for Model {
        fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
            let start = (offset as usize).min(self.0.len());
            let end = (start + len).min(self.0.len());
            Ok(self.0[start..end].to_vec())
        }

        fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
            let end = offset as usize + bytes.len();
            if self.0.len() < end {
                self.0.resize(end, 0);
            }
            self.0[offset as usize..end].copy_from_slice(bytes);
            Ok(())
        }

        fn len(&self) -> io::Result<u64> {
            Ok(self.0.len() as u64)
        }

        fn set_len(&mut self, len: u64) -> io::Result<()> {
            self.0.resize(len as usize, 0);
            Ok(())
        }
    }

    fn write(undo: &mut FileUndo, file: &mut Model, offset: u64, bytes: &[u8]) {
        undo.record(file, offset, bytes.len() as u64).unwrap();
        file.write_at(offset, bytes).unwrap();
    }

    fn truncate(undo: &mut FileUndo, file: &mut Model, len: u64) {
        let cur = file.len().unwrap();
        if len < cur {
            undo.record(file, len, cur - len).unwrap();
        }
        file.set_len(len).unwrap();
    }

    #[test]
    fn missing_skips_saved_extents_and_clips_at_the_synced_length() {
        let mut undo = FileUndo::new(100);
        assert_eq!(undo.missing(90, 20), vec![90..100]);
        assert_eq!(undo.missing(100, 5), Vec::<Range<u64>>::new());
        undo.insert(10, vec![0; 10]);
        undo.insert(40, vec![0; 10]);
        assert_eq!(undo.missing(0, 100), vec![0..10, 20..40, 50..100]);
        assert_eq!(undo.missing(15, 30), vec![20..40]);
        assert_eq!(undo.missing(12, 5), Vec::<Range<u64>>::new());
    }

    #[test]
    fn adjacent_extents_merge() {
        let mut undo = FileUndo::new(100);
        undo.insert(10, vec![1; 10]);
        undo.insert(30, vec![3; 10]);
        undo.insert(20, vec![2; 10]);
        assert_eq!(undo.saved.len(), 1);
        assert_eq!(undo.saved[&10], [[1; 10], [2; 10], [3; 10]].concat());
        assert_eq!(undo.saved_bytes(), 30);
    }

    #[test]
    fn writes_beyond_the_synced_length_save_nothing() {
        let mut file = Model(vec![7; 10]);
        let mut undo = FileUndo::new(10);
        write(&mut undo, &mut file, 10, &[1; 50]);
        write(&mut undo, &mut file, 100, &[1; 50]);
        assert_eq!(undo.saved_bytes(), 0);
        let reverted = undo.revert(&mut file).unwrap();
        assert_eq!(reverted, Reverted { restored: 0, truncated: 140 });
        assert_eq!(file.0, vec![7; 10]);
    }

    #[test]
    fn truncate_then_write_into_the_cut_range_reverts() {
        let synced: Vec<u8> = (0..100).collect();
        let mut file = Model(synced.clone());
        let mut undo = FileUndo::new(100);
        truncate(&mut undo, &mut file, 50);
        write(&mut undo, &mut file, 60, &[0xff; 10]);
        truncate(&mut undo, &mut file, 0);
        write(&mut undo, &mut file, 0, &[0xee; 200]);
        undo.revert(&mut file).unwrap();
        assert_eq!(file.0, synced);
    }

    /// Random writes and truncations, a revert, and the synced content is back.
    #[test]
    fn random_operations_revert_to_the_synced_content() {
        let mut rng = StdRng::seed_from_u64(0x1eaf);
        for _ in 0..500 {
            let len = rng.gen_range(0..300);
            let synced: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let mut file = Model(synced.clone());
            let mut undo = FileUndo::new(len as u64);
            for _ in 0..rng.gen_range(0..20) {
                if rng.gen_bool(0.7) {
                    let offset = rng.gen_range(0..400);
                    let bytes: Vec<u8> = (0..rng.gen_range(1..100)).map(|_| rng.gen()).collect();
                    write(&mut undo, &mut file, offset, &bytes);
                } else {
                    truncate(&mut undo, &mut file, rng.gen_range(0..400));
                }
            }
            assert!(undo.saved_bytes() <= len as u64);
            undo.revert(&mut file).unwrap();
            assert_eq!(file, Model(synced));
        }
    }
}
