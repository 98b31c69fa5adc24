//! The bundled AWS Spot Instance Advisor snapshot (`catalog/aws/spot_interruption.csv`: region,
//! instance type, interruption bucket 0..=4, savings %), cut to GPU and accelerator families
//! from the advisor's public JSON (early 2024; see `catalog/SOURCE.md`).

use std::sync::LazyLock;

use crate::core::spot::SpotRisk;

const CSV: &str = include_str!("../../catalog/aws/spot_interruption.csv");

/// Interruption rates from the bundled advisor snapshot, parsed once.
pub static BUNDLED_SPOT_RISK: LazyLock<SpotRisk> = LazyLock::new(|| {
    let rows = csv::Reader::from_reader(CSV.as_bytes())
        .records()
        .filter_map(Result::ok)
        .filter_map(|r| {
            let bucket = r.get(2)?.parse().ok()?;
            Some((r.get(0)?.to_string(), r.get(1)?.to_string(), bucket))
        })
        .collect::<Vec<_>>();
    SpotRisk::from_aws_advisor(rows)
});
