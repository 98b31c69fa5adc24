//! Metrics decorator (work in progress).
