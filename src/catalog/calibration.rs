//! The published training results the utilisation model is fitted to
//! (`catalog/calibration.csv`, one row per result with its source), and what the estimator
//! predicts for each. A test holds every prediction within ±25 % of its row.

use serde::Deserialize;

use crate::core::catalog::{GpuFacts, Interconnect};
use crate::core::estimate::{Setup, estimate};
use crate::core::job::Precision;

/// The bundled calibration table.
pub const CALIBRATION_CSV: &str = include_str!("../../catalog/calibration.csv");

/// What a row's `published` figure measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Transformer training tokens per second per GPU: model FLOPs are 6 × params per token.
    TokensPerSecPerGpu,
    /// Samples per second per GPU at `flops_per_sample` model FLOPs each.
    SamplesPerSecPerGpu,
    /// Model FLOPs utilisation as the source reports it.
    Mfu,
}

/// One published result.
#[derive(Debug, Clone, Deserialize)]
pub struct CalibrationRow {
    pub id: String,
    pub result: String,
    pub params: f64,
    pub gpu: String,
    pub precision: Precision,
    pub gpus: u32,
    pub gpus_per_node: u32,
    pub interconnect: Interconnect,
    pub metric: Metric,
    pub published: f64,
    pub flops_per_sample: Option<f64>,
    pub source: String,
}

impl CalibrationRow {
    /// What the estimator predicts, in the row's metric; `None` when the GPU has no facts or
    /// no rate at the precision.
    pub fn predicted(&self, gpus: &[GpuFacts]) -> Option<f64> {
        let facts = gpus
            .iter()
            .find(|g| g.name.eq_ignore_ascii_case(&self.gpu))?;
        let nodes = (self.gpus / self.gpus_per_node.max(1)).max(1);
        let e = estimate(
            self.params,
            Setup {
                facts,
                precision: self.precision,
                gpus_per_node: self.gpus_per_node.min(self.gpus),
                nodes,
                interconnect: self.interconnect,
            },
            None,
        )?;
        let per_gpu_flops = e.effective_tflops(1.0) * 1e12;
        Some(match self.metric {
            Metric::TokensPerSecPerGpu => per_gpu_flops / (6.0 * self.params),
            Metric::SamplesPerSecPerGpu => per_gpu_flops / self.flops_per_sample?,
            Metric::Mfu => e.overall(),
        })
    }
}

/// Parses a calibration table with the columns of `catalog/calibration.csv`.
pub fn parse_calibration(text: &str) -> Result<Vec<CalibrationRow>, csv::Error> {
    csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::gpu_facts::{BUNDLED_GPUS_CSV, parse_gpu_facts};

    #[test]
    fn the_estimator_lands_within_25_percent_of_every_published_result() {
        let gpus = parse_gpu_facts(BUNDLED_GPUS_CSV).unwrap();
        let rows = parse_calibration(CALIBRATION_CSV).unwrap();
        assert!(rows.len() >= 20, "{} rows", rows.len());
        let mut misses = Vec::new();
        // `cargo test calibration -- --nocapture` prints the fit.
        println!(
            "{:<28} {:>12} {:>12} {:>6}",
            "id", "published", "predicted", "ratio"
        );
        for row in &rows {
            assert!(
                row.source.contains("https://"),
                "{} needs a source URL",
                row.id
            );
            let predicted = row
                .predicted(&gpus)
                .unwrap_or_else(|| panic!("{}: no estimate for {}", row.id, row.gpu));
            let ratio = predicted / row.published;
            println!(
                "{:<28} {:>12.4} {:>12.4} {:>6.3}",
                row.id, row.published, predicted, ratio
            );
            if !(0.75..=1.25).contains(&ratio) {
                misses.push(format!("{}: {ratio:.3}", row.id));
            }
        }
        assert!(misses.is_empty(), "outside ±25 %: {misses:?}");
    }

    #[test]
    fn every_row_names_a_gpu_with_facts_and_a_unique_id() {
        let gpus = parse_gpu_facts(BUNDLED_GPUS_CSV).unwrap();
        let rows = parse_calibration(CALIBRATION_CSV).unwrap();
        let mut ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), rows.len());
        for r in &rows {
            assert!(gpus.iter().any(|g| g.name == r.gpu), "{}", r.gpu);
            assert_eq!(
                r.flops_per_sample.is_some(),
                r.metric == Metric::SamplesPerSecPerGpu,
                "{}",
                r.id
            );
        }
    }
}
