//! The static provider (work in progress).
