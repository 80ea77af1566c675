//! `peers`: the initial members of a multi-node cluster, written `"1=host:port,2=host:port"`.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::check_host_port;

/// Initial cluster members: node ID → `host:port`. Written as `"1=host:port,2=host:port"` in
/// the file, the environment (`LEAF_PEERS`) and on the command line (`--peers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Peers(pub BTreeMap<u64, String>);

impl Peers {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::str::FromStr for Peers {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut map = BTreeMap::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (id, addr) =
                item.split_once('=').ok_or_else(|| format!("peer {item:?} is not of the form ID=host:port"))?;
            let id: u64 = id.trim().parse().map_err(|_| format!("peer {item:?}: {id:?} is not a node ID"))?;
            if id == 0 {
                return Err(format!("peer {item:?}: node IDs start at 1"));
            }
            let addr = addr.trim();
            check_host_port(addr).map_err(|e| format!("peer {item:?}: {e}"))?;
            if map.insert(id, addr.to_string()).is_some() {
                return Err(format!("node {id} is listed twice in peers"));
            }
        }
        Ok(Peers(map))
    }
}

impl TryFrom<String> for Peers {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Peers> for String {
    fn from(p: Peers) -> String {
        p.0.iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(",")
    }
}
