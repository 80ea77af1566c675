//! `snowflake.worker_ids`: the part of the 1024 worker IDs this cluster takes, so it can run
//! beside old Leaf snowflake servers (which number theirs from 0) without a collision.
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Worker IDs `first..=last`, written `"first-last"` (`"512-1023"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerIds {
    pub first: u16,
    pub last: u16,
}

impl WorkerIds {
    /// Every worker ID.
    pub const ALL: WorkerIds = WorkerIds { first: 0, last: leaf_raft_store::WORKER_IDS - 1 };

    pub fn is_all(self) -> bool {
        self == WorkerIds::ALL
    }

    pub fn count(self) -> usize {
        usize::from(self.last - self.first) + 1
    }

    pub fn contains(self, id: u16) -> bool {
        (self.first..=self.last).contains(&id)
    }
}

impl Default for WorkerIds {
    fn default() -> Self {
        WorkerIds::ALL
    }
}

impl fmt::Display for WorkerIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl std::str::FromStr for WorkerIds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "snowflake.worker_ids must be \"first-last\" within 0-{}, first <= last (e.g. \"512-1023\"), got {:?}",
                leaf_raft_store::WORKER_IDS - 1,
                s.chars().take(32).collect::<String>()
            )
        };
        let (a, b) = s.trim().split_once('-').ok_or_else(bad)?;
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let last: u16 = b.trim().parse().map_err(|_| bad())?;
        if first > last || last >= leaf_raft_store::WORKER_IDS {
            return Err(bad());
        }
        Ok(WorkerIds { first, last })
    }
}

impl Serialize for WorkerIds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WorkerIds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_print() {
        let r: WorkerIds = "512-1023".parse().unwrap();
        assert_eq!((r.first, r.last, r.count()), (512, 1023, 512));
        assert!(r.contains(512) && r.contains(1023) && !r.contains(511));
        assert_eq!(r.to_string(), "512-1023");
        assert_eq!("7-7".parse::<WorkerIds>().unwrap().count(), 1);
        assert!(WorkerIds::default().is_all());
        for bad in ["", "5", "9-3", "0-1024", "-1-3", "a-b", "1-2-3"] {
            assert!(bad.parse::<WorkerIds>().is_err(), "{bad:?}");
        }
    }
}
