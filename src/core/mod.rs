//! The pure decision core: plain data in, answers with reasons out.
//!
//! Nothing under `core` performs I/O, reads a clock, awaits, or touches a database; callers
//! hand in snapshots and `now`. That keeps every decision testable and replayable.

pub mod benchmark;
pub mod capacity;
pub mod catalog;
pub mod cost;
pub mod decision;
pub mod estimate;
pub mod fixed;
pub mod idle;
pub mod job;
pub mod money;
pub mod policy;
pub mod query;
pub mod reconcile;
pub mod scale;
pub mod select;
pub mod shape;
pub mod sim;
pub mod spot;
pub mod terms;
#[cfg(test)]
pub(crate) mod test_support;
pub mod text;
pub mod timestamp;
