//! Black-box and contract tests against real databases: PostgreSQL (`TEST_DATABASE_URL`,
//! default postgres://postgres@127.0.0.1:5432/postgres) and SQLite files.

mod alibaba_mock;
mod auth;
mod aws_moto;
mod aws_wire;
mod aws_xml_fuzz;
mod catalog_csv_fuzz;
mod cli;
mod cloud_events_fuzz;
mod common;
mod http_benchmarks;
mod http_decide;
mod http_import;
mod http_offerings;
mod http_pools;
mod http_prices;
mod http_remote_write;
mod http_surface;
mod idempotency;
mod keda_grpc;
mod moto;
mod mutation;
mod openapi_drift;
mod pg_faults;
mod pg_proxy;
mod pg_tls;
mod reconcile;
mod reconcile_aws;
mod remote_write_fuzz;
mod replicas;
mod scale_properties;
mod select_cases;
mod select_properties;
mod simulate;
mod store_contract;
mod tls;
