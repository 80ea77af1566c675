//! `leaf restore`: a backup into the data directory of the first node of a new cluster, every
//! sequence moved past what the lost cluster can have handed out ([`leaf_raft_store::restore`]
//! plans and applies the jumps; [`leaf_raft_store::restore_store`] writes the directory).
//!
//! Offline and all or nothing: the whole file is read and checked (its SHA-256, the snapshot's
//! own checksum, the end of the file; decrypted first if it is an age file) before anything is
//! written, the target must be blank, and the directory appears under its name only once it is
//! complete. The other members start blank and get the state from this node as a snapshot.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use leaf_api::audit::Actor;
use leaf_raft_store::restore::{apply_plan, plan, Override, Plan, PlanInput, RestoreRecord};
use leaf_raft_store::restore_store::{is_blank, write_restored};
use leaf_raft_store::types::LogId;
use leaf_raft_store::types::Node as BasicNode;
use leaf_raft_store::{read_backup, BackupError, BackupHeader, SmData, StoreOptions};

use super::crypt::{self, CryptError, Keys};
use crate::config::Config;

/// Why a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("{0}")]
    Crypt(#[from] CryptError),
    #[error("the backup is unusable, nothing was written: {0}")]
    Backup(#[from] BackupError),
    #[error(
        "the data directory {dir} was already restored from this backup ({id}, generation {generation}): \
         restoring it again over itself is refused"
    )]
    AlreadyRestored { dir: String, id: String, generation: u32 },
    #[error(
        "the data directory {0} is not empty: a restore writes a new cluster's first node; point --data-dir \
         at a new directory (the other nodes start with blank ones)"
    )]
    NotBlank(String),
    #[error("{0}")]
    Config(String),
    #[error("writing the restored node: {0}")]
    Write(String),
}

/// A backup read whole and checked.
pub struct Loaded {
    pub header: BackupHeader,
    pub data: SmData,
    pub encrypted: bool,
}

impl Loaded {
    /// The backup's ID as printed everywhere (32 hex digits).
    pub fn id(&self) -> String {
        format!("{:032x}", self.header.backup_id)
    }
}

/// Reads and checks the backup at `path` (decrypting it with `keys` if it is encrypted).
pub fn load(path: &Path, keys: &Keys) -> Result<Loaded, RestoreError> {
    let file =
        std::fs::File::open(path).map_err(|source| RestoreError::Open { path: path.display().to_string(), source })?;
    let (reader, encrypted) = crypt::open(file, keys)?;
    let (header, data) = read_backup(reader).map_err(|e| match e {
        // age reports a damaged chunk as an I/O error of the plaintext stream.
        BackupError::Io(io) if encrypted => RestoreError::Crypt(CryptError::Decrypt(io.to_string())),
        other => RestoreError::Backup(other),
    })?;
    Ok(Loaded { header, data, encrypted })
}

/// The plan of restoring `loaded` at `now_ms` with the operator's `overrides`.
pub fn plan_of(loaded: &Loaded, now_ms: i64, overrides: BTreeMap<String, Override>) -> Plan {
    let input = PlanInput {
        now_ms,
        backup_taken_ms: loaded.header.taken_ms,
        nodes: loaded.header.nodes,
        max_step: loaded.header.max_step,
        rates: loaded.header.rates.iter().cloned().collect(),
        overrides,
    };
    plan(&loaded.data.state, &input)
}

/// The raft store's directory inside a node's data directory.
fn raft_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("raft")
}

/// Refuses a target that is not blank, saying so plainly when it holds this very backup.
pub fn check_target(config: &Config, loaded: &Loaded) -> Result<(), RestoreError> {
    let dir = &config.data_dir;
    if is_blank(dir) {
        return Ok(());
    }
    let shown = dir.display().to_string();
    if let Ok((_log, sm)) = leaf_raft_store::open(&raft_dir(dir), &StoreOptions::default()) {
        let lineage = sm.reader().with_state(|s| s.lineage.clone());
        if let Some(r) = lineage.restored_from(loaded.header.backup_id) {
            return Err(RestoreError::AlreadyRestored { dir: shown, id: loaded.id(), generation: r.generation });
        }
    }
    Err(RestoreError::NotBlank(shown))
}

/// The new cluster's voters: `peers` when set (this node must be one), else this node alone at
/// its advertised address.
pub fn members_of(config: &Config) -> Result<BTreeMap<u64, BasicNode>, RestoreError> {
    if config.peers.is_empty() {
        let addr = config.advertise_addr.clone().unwrap_or_else(|| config.http_addr.to_string());
        if config.http_addr.port() == 0 && config.advertise_addr.is_none() {
            return Err(RestoreError::Config(
                "a one-node restore needs the address the node will listen on: set http_addr (not port 0) or \
                 advertise_addr"
                    .into(),
            ));
        }
        return Ok(BTreeMap::from([(config.node_id, BasicNode::new(addr))]));
    }
    if !config.peers.0.contains_key(&config.node_id) {
        return Err(RestoreError::Config(format!(
            "node {} is not in peers: the restored node must be one of the new cluster's members",
            config.node_id
        )));
    }
    Ok(config.peers.0.iter().map(|(id, addr)| (*id, BasicNode::new(addr))).collect())
}

/// Applies `plan` to the backed-up state and writes it as `config`'s node's data directory.
pub async fn write(config: &Config, loaded: Loaded, plan: &Plan, now_ms: i64) -> Result<LogId, RestoreError> {
    let members = members_of(config)?;
    let Loaded { header, mut data, .. } = loaded;
    let record = RestoreRecord {
        backup_id: header.backup_id,
        generation: header.generation + 1,
        backup_taken_ms: header.taken_ms,
        restored_ms: now_ms,
    };
    apply_plan(&mut data.state, plan, record, Actor::Node { id: config.node_id });
    // The restored data directory is the node's: owner-only, as the node keeps it.
    crate::private::restrict_umask();
    std::fs::create_dir_all(&config.data_dir).map_err(|e| RestoreError::Write(e.to_string()))?;
    write_restored(&raft_dir(&config.data_dir), &StoreOptions::default(), data, config.node_id, members)
        .await
        .map_err(|e| RestoreError::Write(e.to_string()))
}
