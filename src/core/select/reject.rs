//! Rejections counted by reason, with the first few examples of each kept as plain values
//! and written out as text only at the end: a scan over the whole catalog rejects thousands
//! of configurations, and only three of each reason are ever read.

use crate::core::catalog::{CatalogSnapshot, Market, Offering};
use crate::core::decision::{RejectReason, Rejections};
use crate::core::fixed::fixed;
use crate::core::text::push;

use super::MARKETS;

const EXAMPLES_PER_REASON: usize = 3;
/// How many reasons there are; [`RejectReason`] variants index the tally in their order.
const REASONS: usize = RejectReason::OverBudget as usize + 1;

/// What an example says after the configuration's name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Detail {
    /// The name alone.
    None,
    /// The GPU has datasheet facts but no bf16.
    NoBf16,
    /// The GPU has neither datasheet facts nor a benchmark.
    NoFacts,
    /// GiB per GPU needed, and usable.
    Memory { need: f64, usable: f64 },
    /// The fabric it has.
    Interconnect,
    /// Spot interruptions would redo half the run or more.
    InterruptionsTooCostly,
    /// Total dollars per hour.
    PricePerHour(f64),
    /// Hours start-up included.
    Hours(f64),
    /// Total dollars.
    Cost(f64),
}

/// A refused configuration's reason and what its example says.
pub(super) type Refusal = (RejectReason, Detail);

/// One example configuration, kept as numbers until it is written out.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Example {
    position: usize,
    nodes: u32,
    market: Market,
    detail: Detail,
}

#[derive(Debug, Default)]
struct Slot {
    count: u64,
    examples: Vec<Example>,
}

/// Rejections counted by reason, keeping the first examples of each in offering order.
#[derive(Debug, Default)]
pub(super) struct RejectTally {
    by_reason: [Slot; REASONS],
}

impl RejectTally {
    /// Counts one rejected configuration. The examples are the first in offering order,
    /// whatever order the configurations are counted in.
    pub(super) fn add(
        &mut self,
        (reason, detail): Refusal,
        position: usize,
        nodes: u32,
        market: Market,
    ) {
        self.by_reason[reason as usize].count += 1;
        self.offer_example((reason, detail), position, nodes, market);
    }

    /// Counts `configurations` more refused for `reason`, their examples offered apart.
    pub(super) fn count_many(&mut self, reason: RejectReason, configurations: u64) {
        self.by_reason[reason as usize].count += configurations;
    }

    /// Whether a configuration of the offering at `position` could still be an example of
    /// `reason`: the examples are not all taken yet, or the last (they are kept in offering
    /// order) is not of an earlier offering.
    pub(super) fn wants_example(&self, reason: RejectReason, position: usize) -> bool {
        let examples = &self.by_reason[reason as usize].examples;
        examples.len() < EXAMPLES_PER_REASON
            || examples.last().is_some_and(|e| e.position >= position)
    }

    /// Keeps a configuration as an example of its reason if it is among the first in
    /// offering order, without counting it.
    pub(super) fn offer_example(
        &mut self,
        (reason, detail): Refusal,
        position: usize,
        nodes: u32,
        market: Market,
    ) {
        let slot = &mut self.by_reason[reason as usize];
        let example = Example {
            position,
            nodes,
            market,
            detail,
        };
        let order = |e: &Example| (e.position, e.nodes, e.market);
        let at = slot
            .examples
            .partition_point(|e| order(e) < order(&example));
        if at < EXAMPLES_PER_REASON {
            slot.examples.truncate(EXAMPLES_PER_REASON - 1);
            slot.examples.insert(at, example);
        }
    }

    /// Counts `nodes` in every market for each offering at `positions` (ascending): the
    /// offerings of one shape share a refusal, and only the first few can be examples.
    pub(super) fn add_each(&mut self, refusal: Refusal, positions: &[u32], nodes: &[u32]) {
        let per_offering = (nodes.len() * MARKETS.len()) as u64;
        for (i, &position) in positions.iter().enumerate() {
            if !self.wants_example(refusal.0, position as usize) {
                self.count_many(refusal.0, per_offering * (positions.len() - i) as u64);
                return;
            }
            for &n in nodes {
                for market in MARKETS {
                    self.add(refusal, position as usize, n, market);
                }
            }
        }
    }

    pub(super) fn count(&self, reason: RejectReason) -> u64 {
        self.by_reason[reason as usize].count
    }

    /// The reasons that rejected anything, in the order of [`RejectReason`], with their
    /// examples written out.
    pub(super) fn into_list(self, catalog: &CatalogSnapshot) -> Vec<Rejections> {
        REASON_ORDER
            .iter()
            .zip(self.by_reason)
            .filter(|(_, slot)| slot.count > 0)
            .map(|(&reason, slot)| Rejections {
                reason,
                count: slot.count,
                examples: slot
                    .examples
                    .iter()
                    .map(|e| example_text(&catalog.offerings()[e.position], e))
                    .collect(),
            })
            .collect()
    }
}

/// Every reason, in declaration order (the order of the answer's list).
const REASON_ORDER: [RejectReason; REASONS] = [
    RejectReason::FilteredByConstraint,
    RejectReason::TooFewGpusPerNode,
    RejectReason::FractionalGpu,
    RejectReason::MemoryDoesNotFit,
    RejectReason::SingleNodeSuffices,
    RejectReason::NoFastInterconnect,
    RejectReason::NoLocalNvme,
    RejectReason::PrecisionUnsupported,
    RejectReason::NoThroughputData,
    RejectReason::SpotNotAllowed,
    RejectReason::NoPrice,
    RejectReason::OverPriceCap,
    RejectReason::MissesDeadline,
    RejectReason::OverBudget,
];

/// Where, what and how many, then why: `aws/us-east-1/-/p4d.24xlarge ×2 spot: $65.54/h`.
/// Written piece by piece into one string: a selection writes a few dozen of these.
fn example_text(o: &Offering, e: &Example) -> String {
    let k = &o.key;
    let zone = if k.zone.is_empty() { "-" } else { &k.zone };
    let mut out = String::with_capacity(96);
    let text = &mut out;
    push!(
        text,
        k.provider,
        "/",
        k.region,
        "/",
        zone,
        "/",
        k.instance_type,
        " ×",
        e.nodes,
        " ",
        e.market.as_str()
    );
    match e.detail {
        Detail::None => {}
        Detail::NoBf16 => push!(text, ": ", o.spec.gpu, " has no bf16"),
        Detail::NoFacts => push!(
            text,
            ": no datasheet TFLOPS for ",
            o.spec.gpu,
            " and no benchmark"
        ),
        Detail::Memory { need, usable } => push!(
            text,
            ": needs ",
            fixed(need, 1),
            " GiB per GPU, ",
            fixed(usable, 1),
            " of ",
            fixed(o.spec.gpu_memory_gib, 1),
            " usable"
        ),
        Detail::Interconnect => push!(text, ": ", o.spec.interconnect.as_str()),
        Detail::InterruptionsTooCostly => {
            push!(text, ": interruptions would cost half the run or more");
        }
        Detail::PricePerHour(p) => push!(text, ": $", fixed(p, 2), "/h"),
        Detail::Hours(h) => push!(text, ": ", fixed(h, 1), " h"),
        Detail::Cost(c) => push!(text, ": $", fixed(c, 0)),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalog::Interconnect;
    use crate::core::test_support::p4d;

    fn catalog() -> CatalogSnapshot {
        let offering = |id: i64, zone: &str| {
            p4d()
                .id(id)
                .at("gcp", "us-central1")
                .zone(zone)
                .instance_type("a2-highgpu-1g")
                .gpus("A100", 1.0, 40.0)
                .host(12.0, 85.0)
                .fabric(Interconnect::None, None)
                .build()
        };
        CatalogSnapshot::new(
            Vec::new(),
            Vec::new(),
            vec![offering(1, ""), offering(2, "us-central1-a")],
        )
    }

    #[test]
    fn reasons_list_in_declaration_order_with_three_examples_each() {
        assert_eq!(REASON_ORDER.len(), REASONS);
        for (i, reason) in REASON_ORDER.iter().enumerate() {
            assert_eq!(*reason as usize, i);
        }
        let mut tally = RejectTally::default();
        tally.add_each((RejectReason::NoPrice, Detail::None), &[0], &[1, 2, 3]);
        tally.add(
            (RejectReason::FilteredByConstraint, Detail::None),
            1,
            1,
            Market::Spot,
        );
        assert_eq!(tally.count(RejectReason::NoPrice), 6);
        assert_eq!(tally.count(RejectReason::OverBudget), 0);
        let list = tally.into_list(&catalog());
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].reason, RejectReason::FilteredByConstraint);
        assert_eq!(
            list[0].examples,
            ["gcp/us-central1/us-central1-a/a2-highgpu-1g ×1 spot"]
        );
        assert_eq!(list[1].count, 6);
        assert_eq!(
            list[1].examples,
            [
                "gcp/us-central1/-/a2-highgpu-1g ×1 on_demand",
                "gcp/us-central1/-/a2-highgpu-1g ×1 spot",
                "gcp/us-central1/-/a2-highgpu-1g ×2 on_demand",
            ]
        );
    }

    #[test]
    fn examples_are_the_first_in_offering_order_whatever_the_counting_order() {
        let mut tally = RejectTally::default();
        let no_price = (RejectReason::NoPrice, Detail::None);
        tally.add_each(no_price, &[7, 9], &[1]);
        tally.add_each(no_price, &[2], &[1, 2]);
        tally.add(no_price, 0, 4, Market::Spot);
        let examples = &tally.by_reason[RejectReason::NoPrice as usize].examples;
        let kept: Vec<(usize, u32, Market)> = examples
            .iter()
            .map(|e| (e.position, e.nodes, e.market))
            .collect();
        assert_eq!(
            kept,
            [
                (0, 4, Market::Spot),
                (2, 1, Market::OnDemand),
                (2, 1, Market::Spot)
            ]
        );
        assert_eq!(tally.count(RejectReason::NoPrice), 4 + 4 + 1);
    }

    #[test]
    fn details_are_written_with_the_offering_they_name() {
        let catalog = catalog();
        let o = &catalog.offerings()[0];
        let text = |detail| {
            example_text(
                o,
                &Example {
                    position: 0,
                    nodes: 2,
                    market: Market::OnDemand,
                    detail,
                },
            )
        };
        let name = "gcp/us-central1/-/a2-highgpu-1g ×2 on_demand";
        assert_eq!(
            text(Detail::Memory {
                need: 50.04,
                usable: 37.0
            }),
            format!("{name}: needs 50.0 GiB per GPU, 37.0 of 40.0 usable")
        );
        assert_eq!(text(Detail::NoBf16), format!("{name}: A100 has no bf16"));
        assert_eq!(
            text(Detail::PricePerHour(7.347)),
            format!("{name}: $7.35/h")
        );
        assert_eq!(text(Detail::Hours(12.26)), format!("{name}: 12.3 h"));
        assert_eq!(text(Detail::Cost(1234.4)), format!("{name}: $1234"));
    }
}
