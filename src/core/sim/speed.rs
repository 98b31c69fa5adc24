//! How fast a job runs on each of a pool's instance types, relative to the first: traces give
//! run times on the pool's first type, and a job that lands on a fallback type (after a
//! capacity error or an interruption) runs as much longer or shorter as the instance
//! selection estimates. The figures come from the same `select` that answers `POST /decide`
//! for a job: measured benchmarks where there are some, datasheet throughput otherwise.

use super::engine::SpeedTable;
use crate::core::catalog::CatalogSnapshot;
use crate::core::job::{Job, Precision};
use crate::core::policy::{Policy, STATIC_PROVIDER};
use crate::core::select::select;
use crate::core::spot::SpotRisk;

/// Run-time factors of the policy's types (1.0 for the first, and for any type the catalog
/// cannot estimate).
pub fn speed_table(catalog: &CatalogSnapshot, risk: &SpotRisk, policy: &Policy) -> SpeedTable {
    if policy.instance_types.len() < 2 {
        return SpeedTable::default();
    }
    let job = Job {
        providers: if policy.provider == STATIC_PROVIDER {
            Vec::new()
        } else {
            vec![policy.provider.clone()]
        },
        // Every training GPU of the catalog has fp16 tensor cores; bf16 would leave out the
        // T4 and V100.
        precision: Precision::Fp16,
        spot_allowed: false,
        top_k: usize::MAX,
        ..Job::default()
    };
    let decision = select(catalog, risk, &job);
    let throughput = |t: &str| {
        decision
            .candidates
            .iter()
            .filter(|c| c.nodes == 1 && c.instance_type == t)
            .filter_map(|c| c.throughput.filter(|t| *t > 0.0))
            .reduce(f64::max)
    };
    let Some(base) = throughput(&policy.instance_types[0].instance_type) else {
        return SpeedTable::default();
    };
    SpeedTable(
        policy
            .instance_types
            .iter()
            .skip(1)
            .filter_map(|c| {
                throughput(&c.instance_type).map(|t| (c.instance_type.clone(), base / t))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::bundled::bundled_snapshot;
    use crate::core::policy::test_policy;

    #[test]
    fn a_faster_fallback_type_runs_jobs_in_less_time() {
        // g4dn.12xlarge has four T4s, g5.12xlarge four A10Gs: the datasheets put an A10G's
        // dense fp16 well above a T4's, so the same job takes a fraction of the time.
        let table = speed_table(&bundled_snapshot(), &SpotRisk::default(), &test_policy());
        let g5 = table
            .0
            .iter()
            .find(|(t, _)| t == "g5.12xlarge")
            .map(|(_, f)| *f);
        assert!(g5.is_some_and(|f| f > 0.0 && f < 1.0), "{table:?}");
    }
}
