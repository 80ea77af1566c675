//! The end of a session: a power cut takes back everything not synced; a clean unmount makes
//! everything durable.

use std::fs;
use std::io;
use std::path::Path;

use crate::dirs::DirOp;
use crate::state::State;
use crate::sys::errno;
use crate::CutReport;

impl State {
    /// Takes back every change not synced: file contents first (through the file system's own
    /// descriptors, whatever their names are now), then the directory changes, last first.
    pub(crate) fn revert(&mut self) -> CutReport {
        let mut report = CutReport::default();
        for (_, mut tracked) in self.files.drain() {
            match tracked.undo.revert(&mut tracked.file) {
                Ok(r) => {
                    report.files_reverted += 1;
                    report.bytes_restored += r.restored;
                    report.bytes_truncated += r.truncated;
                }
                Err(e) => report.problems.push(format!("reverting a file to {} bytes: {e}", tracked.undo.synced_len())),
            }
        }
        for op in self.journal.take_all().into_iter().rev() {
            match self.undo(&op) {
                Ok(()) => report.dir_ops_undone += 1,
                Err(e) => report.problems.push(format!("undoing {op:?}: {e}")),
            }
        }
        if let Err(e) = self.empty_trash() {
            report.problems.push(format!("emptying the trash: {e}"));
        }
        self.stats.cuts += 1;
        report
    }

    /// A clean shutdown: everything is durable.
    pub(crate) fn commit(&mut self) -> io::Result<()> {
        self.files.clear();
        self.journal.take_all();
        self.empty_trash()
    }

    fn empty_trash(&mut self) -> io::Result<()> {
        for entry in fs::read_dir(&self.trash)? {
            let path = entry?.path();
            self.purge(&path)?;
        }
        Ok(())
    }

    fn undo(&mut self, op: &DirOp) -> io::Result<()> {
        match op {
            DirOp::Create { node, .. } => {
                // Gone already if it was removed for good since.
                let Some(path) = self.nodes.path(*node).map(Path::to_path_buf) else { return Ok(()) };
                self.purge(&path)
            }
            DirOp::Remove { parent, name, victim } => {
                let dir = self.dir_path(*parent)?;
                self.restore_entry(&victim.trash, &dir.join(name))
            }
            DirOp::Rename { node, from_parent, from_name, to_parent, to_name, replaced } => {
                let cur = self.path(*node)?;
                match self.dir_path(*from_parent) {
                    Ok(dir) => {
                        let back = dir.join(from_name);
                        if fs::symlink_metadata(&back).is_ok() {
                            return Err(errno(libc::EEXIST));
                        }
                        fs::rename(&cur, &back)?;
                        self.nodes.moved(&cur, &back);
                    }
                    // The old directory is durably gone: so is the entry.
                    Err(_) => self.purge(&cur)?,
                }
                if let Some(victim) = replaced {
                    let dir = self.dir_path(*to_parent)?;
                    self.restore_entry(&victim.trash, &dir.join(to_name))?;
                }
                Ok(())
            }
        }
    }
}
