//! Integration tests of the sled Raft store (the test target `store`): openraft's storage
//! suite ([`suite`]), what survives a reopen or a snapshot install ([`reopen`]), a crash test
//! that `kill -9`s a child process writing through the store ([`crash`]); [`snapshot_install`]
//! replays a follower's snapshot install with crashes, [`checkpoint_prop`] property-tests the
//! checkpoints; [`bit_rot`] flips bytes in the files and expects the open to refuse them;
//! [`compact`] rewrites sled's files at open; [`versions`] keeps an entry of a later cluster
//! version whole and stops at it, and keeps a raised version.
//! [`support`] holds the helpers they share.
mod bit_rot;
mod checkpoint_prop;
mod compact;
mod crash;
mod reopen;
mod snapshot_install;
mod suite;
mod support;
mod versions;
