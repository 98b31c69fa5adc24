//! trainscaler: scaling decisions for machine-learning training on cloud GPUs.
//!
//! `core` is the pure decision core; `catalog` reads provider catalogs; `store` persists; `api`
//! serves HTTP; `app` wires them together and runs the server.

pub mod api;
pub mod app;
pub mod auth;
pub mod catalog;
pub mod chart;
pub mod config;
pub mod core;
pub mod field_error;
pub mod fleet;
pub mod ingest;
pub mod keda;
pub mod markup;
pub mod metrics;
pub mod policy_in;
pub mod provider;
pub mod reconcile;
pub mod sim;
pub mod snapshot;
pub mod store;
pub mod telemetry;
pub mod timefmt;
pub mod tls;
