//! Commands that work on local files first: `leaf certs` (a development CA and the
//! certificates it signs) and `leaf import` (Leaf's `leaf_alloc`, from MySQL or CSV, into the
//! cluster).
pub mod certs;
pub mod import;
