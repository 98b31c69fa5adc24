//! Spot interruption risk: expected interruptions per instance-hour by offering, and what they
//! cost a job that checkpoints.
//!
//! AWS publishes a bucket per region and instance type (the Spot Instance Advisor: share of
//! instances interrupted over the trailing month: <5 %, 5-10 %, 10-15 %, 15-20 %, >20 %). We
//! take each bucket's midpoint (25 % for the open top bucket) and spread it over the 730 hours
//! of a month. Other providers publish no such figure; their defaults are assumptions, stated
//! in every answer.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a, for the advisor's short region and instance-type names. Instance selection looks
/// up every AWS spot configuration here; SipHash's resistance to chosen keys buys nothing
/// for names that come from the catalog and costs most of the lookup.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type NameMap<V> = HashMap<String, V, BuildHasherDefault<Fnv1a>>;

/// Hours in an average month.
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Midpoints of the Spot Advisor buckets, as monthly interruption fractions.
pub const ADVISOR_BUCKET_MIDPOINTS: [f64; 5] = [0.025, 0.075, 0.125, 0.175, 0.25];

/// Interruptions per instance-hour assumed where no measurement exists, by provider.
pub fn provider_default_rate(provider: &str) -> f64 {
    let monthly = match provider {
        // AWS types the advisor does not list yet: its middle bucket.
        "aws" => 0.125,
        // Preemptible capacity without published rates.
        "gcp" | "azure" | "nebius" => 0.15,
        // A marketplace's interruptible bids are outbid more often.
        "vast" => 0.30,
        _ => 0.20,
    };
    monthly / HOURS_PER_MONTH
}

/// Where a rate came from, for the answer's assumptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateSource {
    Advisor,
    ProviderDefault,
}

/// Interruption rates known per AWS instance type and region.
#[derive(Debug, Clone, Default)]
pub struct SpotRisk {
    /// instance type -> region -> interruptions per instance-hour. Nested so that lookups by
    /// `&str` need no allocation, and by type first because selection looks up every region
    /// of one instance type in turn ([`SpotRisk::of_type`]).
    aws: NameMap<NameMap<f64>>,
}

impl SpotRisk {
    /// From Spot Advisor rows: (region, instance type, bucket 0..=4) for AWS.
    pub fn from_aws_advisor(rows: impl IntoIterator<Item = (String, String, usize)>) -> Self {
        let mut aws: NameMap<NameMap<f64>> = NameMap::default();
        for (region, it, bucket) in rows {
            if let Some(monthly) = ADVISOR_BUCKET_MIDPOINTS.get(bucket) {
                aws.entry(it)
                    .or_default()
                    .insert(region, monthly / HOURS_PER_MONTH);
            }
        }
        Self { aws }
    }

    /// Interruptions per instance-hour for one offering, and where the figure came from.
    pub fn rate(&self, provider: &str, region: &str, instance_type: &str) -> (f64, RateSource) {
        self.of_type(provider, instance_type).rate(region)
    }

    /// The rates of one provider's instance type, to look up region by region.
    pub fn of_type(&self, provider: &str, instance_type: &str) -> TypeRisk<'_> {
        TypeRisk {
            by_region: (provider == "aws")
                .then(|| self.aws.get(instance_type))
                .flatten(),
            default: provider_default_rate(provider),
        }
    }
}

/// The interruption rates of one provider's instance type ([`SpotRisk::of_type`]).
#[derive(Debug, Clone, Copy)]
pub struct TypeRisk<'a> {
    by_region: Option<&'a NameMap<f64>>,
    default: f64,
}

impl TypeRisk<'_> {
    /// Interruptions per instance-hour in `region`, and where the figure came from.
    pub fn rate(&self, region: &str) -> (f64, RateSource) {
        match self.by_region.and_then(|rates| rates.get(region)) {
            Some(r) => (*r, RateSource::Advisor),
            None => (self.default, RateSource::ProviderDefault),
        }
    }

    /// The highest rate [`TypeRisk::rate`] gives in any region.
    pub fn highest_rate(&self) -> (f64, RateSource) {
        self.by_region
            .into_iter()
            .flat_map(|rates| rates.values())
            .fold((self.default, RateSource::ProviderDefault), |high, &r| {
                if r > high.0 {
                    (r, RateSource::Advisor)
                } else {
                    high
                }
            })
    }
}

/// Work an interruption throws away, plus the restart, in hours. An interruption at a
/// uniformly random moment loses the work since the last checkpoint: half a checkpoint
/// interval on average. A run shorter than the interval has no checkpoint to fall back to and
/// loses half of itself on average, so the interval is capped by the run's own length
/// (`run_hours`, when the amount of work is known).
pub fn loss_per_interruption_hours(
    run_hours: Option<f64>,
    checkpoint_min: f64,
    restart_min: f64,
) -> f64 {
    let interval_min = match run_hours {
        Some(h) => checkpoint_min.min(h * 60.0),
        None => checkpoint_min,
    };
    (interval_min / 2.0 + restart_min) / 60.0
}

/// How spot interruptions stretch a job of `hours` on `nodes` nodes that loses `loss_hours`
/// to each interruption ([`loss_per_interruption_hours`]). Any node's interruption stops the
/// whole gang, so the job's rate is the per-node rate times the node count.
///
/// Returns (stretched hours, expected interruptions), or `None` when interruptions would eat
/// half the run or more: such a job should not run on spot at all.
pub fn stretch(
    hours: f64,
    rate_per_node_hour: f64,
    nodes: u32,
    loss_hours: f64,
) -> Option<(f64, f64)> {
    let job_rate = rate_per_node_hour * f64::from(nodes);
    // Work redone after an interruption can be interrupted again: a geometric series,
    // hours / (1 - rate × loss), which to first order is the linear hours × (1 + rate × loss).
    let lost_share = job_rate * loss_hours;
    if lost_share >= 0.5 {
        return None;
    }
    let stretched = hours / (1.0 - lost_share);
    Some((stretched, job_rate * stretched))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advisor_buckets_become_hourly_rates() {
        let risk = SpotRisk::from_aws_advisor([("us-east-1".into(), "p4d.24xlarge".into(), 4)]);
        let (rate, source) = risk.rate("aws", "us-east-1", "p4d.24xlarge");
        assert_eq!(source, RateSource::Advisor);
        assert!((rate - 0.25 / 730.0).abs() < 1e-12);
        assert_eq!(
            risk.rate("aws", "eu-west-1", "p4d.24xlarge").1,
            RateSource::ProviderDefault
        );
    }

    #[test]
    fn interruptions_stretch_a_checkpointing_job() {
        // 1 interruption per 100 node-hours, 2 nodes, 10 min checkpoints, 5 min restart:
        // job rate 0.02/h, loss 10 min = 1/6 h per interruption, lost share 1/300.
        let loss = loss_per_interruption_hours(Some(100.0), 10.0, 5.0);
        assert!((loss - 1.0 / 6.0).abs() < 1e-12);
        let (hours, interruptions) = stretch(100.0, 0.01, 2, loss).unwrap();
        assert!((hours - 100.0 / (1.0 - 0.02 / 6.0)).abs() < 1e-9);
        assert!((interruptions - 0.02 * hours).abs() < 1e-9);
        // A 32-node gang checkpointing once a week on an interruption-prone type: each
        // interruption loses 84 hours, at 0.011 interruptions an hour: most of the run.
        let weekly = loss_per_interruption_hours(Some(100.0), 7.0 * 24.0 * 60.0, 5.0);
        assert_eq!(stretch(100.0, 0.25 / 730.0, 32, weekly), None);
    }

    #[test]
    fn a_run_shorter_than_its_checkpoint_interval_loses_at_most_half_of_itself() {
        // A 12-minute run that checkpoints hourly: an interruption loses 6 minutes on
        // average, not 30, plus the 5-minute restart.
        let loss = loss_per_interruption_hours(Some(0.2), 60.0, 5.0);
        assert!((loss - 11.0 / 60.0).abs() < 1e-12, "{loss}");
        // Unknown length: half the interval.
        let loss = loss_per_interruption_hours(None, 60.0, 5.0);
        assert!((loss - 35.0 / 60.0).abs() < 1e-12, "{loss}");
    }
}
