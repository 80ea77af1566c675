//! What a command's fields may hold, checked without the state: by [`crate::apply::apply`]
//! before it changes anything (a peer holding the cluster secret can propose any operation,
//! bypassing the HTTP checks), and by the leader before it proposes ([`check_command`], which
//! also bounds the encoded size).
use leaf_api::codec;
use leaf_api::tag::{validate_max_id, validate_step, validate_tag};

use crate::apply::{invalid, ApplyError};
use crate::command::{Command, NumberRules, Op};
use crate::profile::StoredProfile;
use crate::tags::{NewTag, MAX_DESCRIPTION_BYTES, MAX_SEGMENT_ASKS, MAX_TAGS_PER_COMMAND};
use crate::tokens::TokenLimits;
use crate::workers::{MAX_HIGH_WATER_AHEAD_MS, MAX_LEASE_MS, MIN_LEASE_MS, WORKER_IDS};

/// Largest encoded [`Command`] (through [`leaf_api::codec`]) the leader proposes. The largest
/// valid command, a tag creation with a 128-byte tag and a 1,024-byte description, encodes to
/// about 1.2 KiB; anything beyond this bound is refused by [`check_command`] before it reaches
/// the log (a replication RPC carries up to 8 MiB of entries).
pub const MAX_COMMAND_BYTES: usize = 4096;

/// Largest encoded [`Op::CreateTags`] command: [`crate::tags::MAX_TAGS_PER_COMMAND`] tags of
/// about 1.2 KiB each at worst would not fit, so the node splits a batch into entries under
/// this bound. A node catching up from the log receives up to 32 entries in one request of at
/// most 16 MiB, so 32 of these must fit (the node's `MAX_APPEND_ENTRIES`); earlier builds
/// proposed entries of up to 1 MiB, which `apply` still takes (it checks no size).
pub const MAX_BATCH_COMMAND_BYTES: usize = 384 * 1024;

fn check_lease(lease_ms: i64) -> Result<(), ApplyError> {
    if (MIN_LEASE_MS..=MAX_LEASE_MS).contains(&lease_ms) {
        Ok(())
    } else {
        Err(invalid(format!("lease of {lease_ms} ms is outside {MIN_LEASE_MS}..={MAX_LEASE_MS}")))
    }
}

fn check_ask(tag: &str, step: i64, node_id: u64) -> Result<(), ApplyError> {
    validate_tag(tag)?;
    validate_step(step)?;
    check_node_id(node_id)
}

fn check_node_id(node_id: u64) -> Result<(), ApplyError> {
    if node_id == 0 {
        return Err(invalid("node IDs start at 1"));
    }
    Ok(())
}

fn check_description(description: &str) -> Result<(), ApplyError> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(invalid(format!(
            "description is {} bytes long; the limit is {MAX_DESCRIPTION_BYTES}",
            description.len()
        )));
    }
    Ok(())
}

/// Checks every field of a tag to create.
fn check_new_tag(t: &NewTag) -> Result<(), ApplyError> {
    check_new_tag_fields(&t.tag, t.step, t.start_max_id, &t.description, &t.profile, t.upper_bound)
}

/// The fields of a tag to create (borrowed, not copied).
fn check_new_tag_fields(
    tag: &str,
    step: i64,
    start_max_id: i64,
    description: &str,
    profile: &StoredProfile,
    upper_bound: Option<i64>,
) -> Result<(), ApplyError> {
    validate_tag(tag)?;
    validate_step(step)?;
    validate_max_id(start_max_id)?;
    check_description(description)?;
    profile.check_create(start_max_id, upper_bound)
}

/// Checks every field of `cmd` on its own (no state needed): what [`crate::apply::apply`]
/// checks first and [`check_command`] checks before proposing.
pub(crate) fn check_fields(cmd: &Command) -> Result<(), ApplyError> {
    match &cmd.op {
        Op::CreateTag { tag, .. } => check_new_tag(tag),
        Op::PutTemplate(t) => crate::templates::check_new(t),
        Op::DeleteTemplate { name } => {
            leaf_api::template::validate_template_name(name).map_err(|e| invalid(e.to_string()))
        }
        Op::CreateTags { tags } => {
            if tags.is_empty() || tags.len() > MAX_TAGS_PER_COMMAND {
                return Err(invalid(format!("a batch creates 1 to {MAX_TAGS_PER_COMMAND} tags, not {}", tags.len())));
            }
            let mut names = std::collections::BTreeSet::new();
            for t in tags {
                check_new_tag(t)?;
                if !names.insert(t.tag.as_str()) {
                    return Err(invalid(format!("tag {:?} is twice in the batch", t.tag)));
                }
            }
            Ok(())
        }
        Op::UpdateTag { tag, step, description } => {
            validate_tag(tag)?;
            if let Some(step) = step {
                validate_step(*step)?;
            }
            if let Some(d) = description {
                check_description(d)?;
            }
            Ok(())
        }
        Op::ArchiveTag { tag } | Op::RestoreTag { tag } => Ok(validate_tag(tag)?),
        Op::AllocateSegment { tag, step, node_id } => check_ask(tag, *step, *node_id),
        Op::AllocateSegments { asks } => {
            if asks.is_empty() || asks.len() > MAX_SEGMENT_ASKS {
                return Err(invalid(format!("a group holds 1 to {MAX_SEGMENT_ASKS} allocations, not {}", asks.len())));
            }
            asks.iter().try_for_each(|a| check_ask(&a.tag, a.step, a.node_id))
        }
        Op::IssueNumbers { asks, rules: NumberRules::Owned } => crate::gapless::check_owned_asks(asks),
        Op::IssueNumbers { asks, rules: NumberRules::Plain } => crate::gapless::check_asks(asks),
        Op::SetSeriesLimits { tag, limits } => {
            validate_tag(tag)?;
            limits.validate().map_err(|e| invalid(e.to_string()))
        }
        Op::RegisterWorker { node_id, lease_ms, within } => {
            check_node_id(*node_id)?;
            check_lease(*lease_ms)?;
            let Some((first, last)) = within else { return Ok(()) };
            if first > last || *last >= WORKER_IDS {
                return Err(invalid(format!("worker IDs {first}..={last} are not a range within 0..{WORKER_IDS}")));
            }
            Ok(())
        }
        Op::CreateToken { token, limits } => {
            crate::tokens::check_new(token)?;
            limits.as_ref().map_or(Ok(()), TokenLimits::check)
        }
        Op::RotateToken { grace_ms, .. } => crate::tokens::check_grace(*grace_ms),
        Op::RevokeToken { .. } => Ok(()),
        Op::SetClusterVersion { version } => {
            let (lowest, highest) = (crate::version::ClusterVersion(2), crate::version::SUPPORTED);
            if *version < lowest || *version > highest {
                return Err(invalid(format!("cluster version {version} is outside {lowest}..={highest}")));
            }
            Ok(())
        }
        Op::JoinRegion { name, workers } => {
            crate::regions::validate_name(name)?;
            if !(1..=WORKER_IDS).contains(workers) {
                return Err(invalid(format!("a region holds 1 to {WORKER_IDS} worker IDs, not {workers}")));
            }
            Ok(())
        }
        Op::RetireRegion { name } => crate::regions::validate_name(name),
        Op::GrantBlock { region, tag, size, above } => {
            crate::regions::validate_name(region)?;
            validate_tag(tag)?;
            validate_step(*size)?;
            Ok(validate_max_id(*above)?)
        }
        Op::AdoptRegion(identity) => {
            crate::regions::validate_name(&identity.name)?;
            crate::regions::check_region_fields(identity.id, identity.first_worker, identity.last_worker)
                .map_err(invalid)
        }
        Op::ClaimHome { region, tag } | Op::ReleaseHome { region, tag, .. } => {
            crate::regions::validate_name(region)?;
            Ok(validate_tag(tag)?)
        }
        Op::MoveHome { tag, to } => {
            crate::regions::validate_name(to)?;
            Ok(validate_tag(tag)?)
        }
        Op::RenewLease { region } => crate::regions::validate_name(region),
        Op::AdoptHome { tag, home } => {
            validate_tag(tag)?;
            crate::regions::validate_name(&home.region)?;
            if let Some(from) = &home.from {
                crate::regions::validate_name(from)?;
            }
            if home.epoch == 0 {
                return Err(invalid(format!("tag {tag:?}: a home's epoch starts at 1")));
            }
            Ok(())
        }
        Op::AdoptBlock { tag, block } => {
            validate_tag(tag)?;
            if block.start < 0 || block.start >= block.end {
                return Err(invalid(format!("block [{}, {}) is not a range of IDs", block.start, block.end)));
            }
            Ok(())
        }
        // Checked where it is: the state machine stops before it, and the leader never proposes it.
        Op::Undecodable(_) => Ok(()),
        Op::NoteMembership(action) => crate::audit::check_note(action),
        Op::Admin { actor, retention, op, .. } => {
            if !op.is_admin() {
                return Err(invalid("only an admin change may be wrapped with its actor"));
            }
            if !actor.is_bounded() {
                return Err(invalid("the actor's name is too long"));
            }
            crate::audit::check_retention(retention)?;
            check_fields(&Command { at_ms: cmd.at_ms, op: (**op).clone() })
        }
        Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
            check_node_id(*node_id)?;
            if *worker_id >= WORKER_IDS {
                return Err(invalid(format!("worker ID {worker_id} is not below {WORKER_IDS}")));
            }
            check_lease(*lease_ms)?;
            let ahead = cmd.at_ms.saturating_add(MAX_HIGH_WATER_AHEAD_MS);
            if !(0..=ahead).contains(high_water_ms) {
                return Err(invalid(format!(
                    "high-water mark {high_water_ms} ms is outside 0..={ahead} (at most \
                     {MAX_HIGH_WATER_AHEAD_MS} ms after the command's time {})",
                    cmd.at_ms
                )));
            }
            Ok(())
        }
    }
}

/// What the leader checks before proposing `cmd`: every field as [`crate::apply::apply`] checks it, and its
/// encoded size against [`MAX_COMMAND_BYTES`]. A command that passes can still be rejected by
/// [`crate::apply::apply`] for the state it meets (an existing tag, the [`crate::tags::MAX_TAGS`] bound, a lost worker).
pub fn check_command(cmd: &Command) -> Result<(), ApplyError> {
    check_fields(cmd)?;
    let len = codec::encode(cmd).map_err(|e| invalid(format!("command does not encode: {e}")))?.len();
    let max = match cmd.op.inner() {
        Op::CreateTags { .. } | Op::AllocateSegments { .. } | Op::IssueNumbers { .. } => MAX_BATCH_COMMAND_BYTES,
        _ => MAX_COMMAND_BYTES,
    };
    if len > max {
        return Err(invalid(format!("command encodes to {len} bytes; the limit is {max}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::{apply, Changes};
    use crate::profile::StoredProfile;
    use crate::state::{record_members, State};
    use crate::testing::{alloc, ap, at, cmd, create, grant, register};

    #[test]
    fn invalid_commands_are_rejected() {
        let mut s = State::default();
        assert!(matches!(ap(&mut s, &create("bad tag", 10, 1)), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &create("t", 0, 1)), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &create("t", 10, -1)), Err(ApplyError::Invalid(_))));
        ap(&mut s, &create("t", 10, 1)).unwrap();
        assert!(matches!(ap(&mut s, &alloc("t", 0)), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &alloc("t", -10)), Err(ApplyError::Invalid(_))));
        let upd = cmd(Op::UpdateTag { tag: "t".into(), step: Some(0), description: None });
        assert!(matches!(ap(&mut s, &upd), Err(ApplyError::Invalid(_))));
        assert_eq!(s.tags["t"].max_id, 1);
    }

    /// Every field a forwarded operation carries is checked by `apply` itself, with
    /// `Invalid`, and a rejected operation changes nothing.
    #[test]
    fn apply_rejects_every_invalid_field_and_changes_nothing() {
        let mut s = State::default();
        record_members(&mut s, [1, 2], &mut Changes::default());
        ap(&mut s, &create("t", 10, 1)).unwrap();
        grant(register(&mut s, 0, 1));
        let long = "x".repeat(MAX_DESCRIPTION_BYTES + 1);
        let renew = |node_id, worker_id, high_water_ms, lease_ms| Op::RenewWorker {
            node_id,
            worker_id,
            high_water_ms,
            lease_ms,
        };
        let bad: Vec<(&str, Op)> = vec![
            ("create: tag", Op::create_segment_tag("a/b".into(), 1, 0, String::new())),
            ("create: empty tag", Op::create_segment_tag(String::new(), 1, 0, String::new())),
            ("create: step", Op::create_segment_tag("u".into(), leaf_api::tag::MAX_STEP + 1, 0, String::new())),
            ("create: max_id", Op::create_segment_tag("u".into(), 1, -1, String::new())),
            ("create: description", Op::create_segment_tag("u".into(), 1, 0, long.clone())),
            ("update: tag", Op::UpdateTag { tag: "x".repeat(129), step: None, description: None }),
            ("update: step", Op::UpdateTag { tag: "t".into(), step: Some(-1), description: None }),
            ("update: description", Op::UpdateTag { tag: "t".into(), step: None, description: Some(long.clone()) }),
            ("allocate: tag", Op::AllocateSegment { tag: "t t".into(), step: 1, node_id: 1 }),
            ("allocate: step", Op::AllocateSegment { tag: "t".into(), step: 0, node_id: 1 }),
            ("allocate: node", Op::AllocateSegment { tag: "t".into(), step: 1, node_id: 0 }),
            ("register: node", Op::RegisterWorker { node_id: 0, lease_ms: 10_000, within: None }),
            ("register: lease low", Op::RegisterWorker { node_id: 2, lease_ms: MIN_LEASE_MS - 1, within: None }),
            ("register: lease high", Op::RegisterWorker { node_id: 2, lease_ms: MAX_LEASE_MS + 1, within: None }),
            ("renew: node", renew(0, 0, 5, 10_000)),
            ("renew: worker ID", renew(1, WORKER_IDS, 5, 10_000)),
            ("renew: worker ID max", renew(1, u16::MAX, 5, 10_000)),
            ("renew: lease", renew(1, 0, 5, 0)),
            ("renew: negative high water", renew(1, 0, -1, 10_000)),
            ("renew: high water far ahead", renew(1, 0, 1_000 + MAX_HIGH_WATER_AHEAD_MS + 1, 10_000)),
            ("renew: high water at the end of time", renew(1, 0, i64::MAX, 10_000)),
        ];
        for (what, op) in bad {
            let before = s.clone();
            let mut changes = Changes::default();
            let c = at(1_000, op);
            let r = apply(&mut s, &c, &mut changes);
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{what}: {r:?}");
            assert_eq!(s, before, "{what}: a rejected command changed the state");
            assert!(changes.is_empty(), "{what}: a rejected command noted changes: {changes:?}");
            assert!(matches!(check_command(&c), Err(ApplyError::Invalid(_))), "{what}: check_command let it through");
        }
        // The limits themselves are accepted.
        let at_limit = Op::create_segment_tag(
            "x".repeat(leaf_api::tag::MAX_TAG_LEN),
            leaf_api::tag::MAX_STEP,
            i64::MAX,
            "d".repeat(MAX_DESCRIPTION_BYTES),
        );
        assert!(check_command(&at(1_000, at_limit.clone())).is_ok());
        assert!(ap(&mut s, &at(1_000, at_limit)).is_ok());
        assert!(ap(&mut s, &at(1_000, renew(1, 0, 1_000 + MAX_HIGH_WATER_AHEAD_MS, MAX_LEASE_MS))).is_ok());
    }

    /// The largest valid command stays far below `MAX_COMMAND_BYTES`; a bigger one (which no
    /// valid field set produces) is refused by its encoded size alone.
    #[test]
    fn check_command_bounds_the_encoded_size() {
        let largest = at(
            i64::MIN,
            Op::CreateTag {
                tag: NewTag {
                    tag: "x".repeat(leaf_api::tag::MAX_TAG_LEN),
                    step: leaf_api::tag::MAX_STEP,
                    start_max_id: i64::MAX - 1,
                    description: "d".repeat(MAX_DESCRIPTION_BYTES),
                    profile: StoredProfile::Obfuscated { key: [0xff; crate::OBFUSCATION_KEY_BYTES] },
                    upper_bound: Some(i64::MAX - 1),
                },
                cap: crate::TagCap::Legacy,
            },
        );
        let len = codec::encode(&largest).unwrap().len();
        assert!(len <= MAX_COMMAND_BYTES / 2, "the largest valid command is {len} bytes");
        assert!(check_command(&largest).is_ok());
        let mut s = State::default();
        let huge = at(0, Op::UpdateTag { tag: "t".into(), step: None, description: Some("d".repeat(8 << 20)) });
        assert!(matches!(check_command(&huge), Err(ApplyError::Invalid(_))));
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let before = s.clone();
        assert!(matches!(ap(&mut s, &huge), Err(ApplyError::Invalid(_))), "apply refuses an 8 MiB description");
        assert_eq!(s, before);
    }
}
