//! Parsers for signals from outside the service: metrics that other systems push to us, turned
//! into the plain samples the decision core reads.

pub mod cloud_events;
pub mod event_queue;
pub mod limits;
pub mod notices;
pub mod pubsub;
pub mod remote_write;
pub mod sns;
pub mod sns_signature;
pub mod worker_gate;
