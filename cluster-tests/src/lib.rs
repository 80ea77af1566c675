//! Cluster and chaos testing of leaf.
//!
//! Layout:
//! - [`checker`]: verifies what clients received against what the cluster committed —
//!   uniqueness per tag and "every ID lies inside a committed allocation". Used by the node's
//!   integration tests now and by the multi-process cluster and chaos runs.
pub mod checker;
