//! The hash chains of a gapless series: one per period, over the period's events in the order
//! they were applied. An event is a number's issue or reservation, or a reservation's
//! confirmation or void; each has its place `seq` (1, 2, …) in its period and a link: SHA-256
//! over the link before it ([`CHAIN_GENESIS`] for the first) and the event's fields, each
//! length-prefixed or fixed-width, so no two different events hash the same input.
//!
//! A period's chain is whole in itself, so retention can drop an old period without breaking
//! the others. The series' `head` is the digest of every kept period's last link
//! ([`heads_digest`]): one value an auditor compares an export with.
use leaf_api::audit::Actor;
use leaf_api::gapless::VoidCause;

/// The link before a period's first event.
pub const CHAIN_GENESIS: [u8; 32] = [0; 32];

/// One event of a period's chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainEvent<'a> {
    /// A number issued final at once to `key`.
    Issue { key: &'a str, actor: &'a Actor, at_ms: i64 },
    /// A number reserved for `key` until `deadline_ms`.
    Reserve { key: &'a str, actor: &'a Actor, at_ms: i64, deadline_ms: i64 },
    /// A reservation made final.
    Confirm { actor: &'a Actor, at_ms: i64 },
    /// A reservation voided.
    Void { actor: &'a Actor, at_ms: i64, cause: VoidCause, reason: &'a str },
}

/// The link of `event`, the `seq`th of period `period` of series `tag`, about number `number`,
/// after the link `prev`.
pub fn chain_hash(prev: &[u8; 32], tag: &str, (period, number): (u32, u64), seq: u64, event: &ChainEvent) -> [u8; 32] {
    let mut input = Vec::with_capacity(128 + tag.len());
    input.extend_from_slice(b"leaf-gapless-chain-v2\0");
    input.extend_from_slice(prev);
    let kind: u8 = match event {
        ChainEvent::Issue { .. } => 1,
        ChainEvent::Reserve { .. } => 2,
        ChainEvent::Confirm { .. } => 3,
        ChainEvent::Void { .. } => 4,
    };
    input.push(kind);
    field(&mut input, tag.as_bytes());
    input.extend_from_slice(&period.to_be_bytes());
    input.extend_from_slice(&number.to_be_bytes());
    input.extend_from_slice(&seq.to_be_bytes());
    match event {
        ChainEvent::Issue { key, actor, at_ms } => {
            field(&mut input, key.as_bytes());
            field(&mut input, actor_text(actor).as_bytes());
            input.extend_from_slice(&at_ms.to_be_bytes());
        }
        ChainEvent::Reserve { key, actor, at_ms, deadline_ms } => {
            field(&mut input, key.as_bytes());
            field(&mut input, actor_text(actor).as_bytes());
            input.extend_from_slice(&at_ms.to_be_bytes());
            input.extend_from_slice(&deadline_ms.to_be_bytes());
        }
        ChainEvent::Confirm { actor, at_ms } => {
            field(&mut input, actor_text(actor).as_bytes());
            input.extend_from_slice(&at_ms.to_be_bytes());
        }
        ChainEvent::Void { actor, at_ms, cause, reason } => {
            field(&mut input, actor_text(actor).as_bytes());
            input.extend_from_slice(&at_ms.to_be_bytes());
            input.push(match cause {
                VoidCause::Caller => 1,
                VoidCause::Expired => 2,
                VoidCause::PeriodClosed => 3,
                VoidCause::Lost => 4,
            });
            field(&mut input, reason.as_bytes());
        }
    }
    sha256(&input)
}

/// The digest of a series' kept periods, each as (period, its count of events, its last link),
/// in period order: [`CHAIN_GENESIS`] for a series without a number.
pub fn heads_digest(periods: impl IntoIterator<Item = (u32, u64, [u8; 32])>) -> [u8; 32] {
    let mut input = b"leaf-gapless-heads-v2\0".to_vec();
    let start = input.len();
    for (period, events, head) in periods {
        input.extend_from_slice(&period.to_be_bytes());
        input.extend_from_slice(&events.to_be_bytes());
        input.extend_from_slice(&head);
    }
    if input.len() == start {
        return CHAIN_GENESIS;
    }
    sha256(&input)
}

fn field(input: &mut Vec<u8>, b: &[u8]) {
    input.extend_from_slice(&(b.len() as u32).to_be_bytes());
    input.extend_from_slice(b);
}

fn sha256(input: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, input);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// An actor as the chain hashes it: its kind and fields, `:`-separated.
fn actor_text(actor: &Actor) -> String {
    match actor {
        Actor::AdminToken => "admin_token".into(),
        Actor::ClientCert { name } => format!("client_cert:{name}"),
        Actor::Loopback => "loopback".into(),
        Actor::Token { id, name } => format!("token:{}:{name}", id.0),
        Actor::Node { id } => format!("node:{id}"),
        Actor::Unattributed => "unattributed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_changes_the_link() {
        let a = Actor::Unattributed;
        let issue = ChainEvent::Issue { key: "a", actor: &a, at_ms: 5 };
        let base = chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 1, &issue);
        let admin = Actor::AdminToken;
        let others = [
            chain_hash(&[1; 32], "inv", (2026, 1), 1, &issue),
            chain_hash(&CHAIN_GENESIS, "inw", (2026, 1), 1, &issue),
            chain_hash(&CHAIN_GENESIS, "inv", (2027, 1), 1, &issue),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 2), 1, &issue),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 2, &issue),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 1, &ChainEvent::Issue { key: "b", actor: &a, at_ms: 5 }),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 1, &ChainEvent::Issue { key: "a", actor: &admin, at_ms: 5 }),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 1, &ChainEvent::Issue { key: "a", actor: &a, at_ms: 6 }),
            chain_hash(
                &CHAIN_GENESIS,
                "inv",
                (2026, 1),
                1,
                &ChainEvent::Reserve { key: "a", actor: &a, at_ms: 5, deadline_ms: 9 },
            ),
        ];
        for (i, o) in others.iter().enumerate() {
            assert_ne!(&base, o, "variant {i}");
        }
        let void = |cause, reason| ChainEvent::Void { actor: &a, at_ms: 5, cause, reason };
        let v = chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 2, &void(VoidCause::Caller, "x"));
        assert_ne!(v, chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 2, &void(VoidCause::Caller, "y")));
        assert_ne!(v, chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 2, &void(VoidCause::Expired, "x")));
        let confirm = chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), 2, &ChainEvent::Confirm { actor: &a, at_ms: 5 });
        assert_ne!(v, confirm);
    }

    #[test]
    fn the_digest_covers_each_period() {
        assert_eq!(heads_digest([]), CHAIN_GENESIS);
        let one = heads_digest([(2026, 3, [7; 32])]);
        assert_ne!(one, CHAIN_GENESIS);
        assert_ne!(one, heads_digest([(2026, 4, [7; 32])]));
        assert_ne!(one, heads_digest([(2026, 3, [8; 32])]));
        assert_ne!(one, heads_digest([(2025, 3, [7; 32])]));
        assert_ne!(one, heads_digest([(2025, 1, [1; 32]), (2026, 3, [7; 32])]));
    }
}
