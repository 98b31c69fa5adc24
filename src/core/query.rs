//! Filtering and keyset pagination of offerings over a [`CatalogSnapshot`].
//!
//! Pages are cut by (sort price, id) rather than by offset, so a catalog swap between two page
//! requests neither repeats nor skips an offering whose price did not change.

use super::catalog::{CatalogSnapshot, Market, Offering, list_sort_key};
use super::money::Micros;

/// A validated offerings query; every field narrows the result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferingQuery {
    pub provider: Option<String>,
    pub region: Option<String>,
    /// Matched case-insensitively against the GPU model name.
    pub gpu: Option<String>,
    pub min_gpus: Option<f64>,
    /// Per-GPU memory.
    pub min_gpu_memory_gib: Option<f64>,
    /// Only offerings priced in this market; sorting and `max_price` then use that price.
    pub market: Option<Market>,
    pub max_price: Option<Micros>,
    pub after: Option<PageCursor>,
    pub limit: usize,
}

/// Where the previous page ended: the sort key of its last item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCursor {
    pub price: i64,
    pub id: i64,
}

/// One page of offerings and where the next one starts.
#[derive(Debug)]
pub struct OfferingPage<'a> {
    pub items: Vec<&'a Offering>,
    pub next: Option<PageCursor>,
}

impl OfferingQuery {
    fn sort_key(&self, o: &Offering) -> (i64, i64) {
        match self.market {
            Some(market) => (o.price(market).map_or(i64::MAX, |m| m.0), o.id),
            None => list_sort_key(o),
        }
    }

    fn matches(&self, o: &Offering) -> bool {
        let price = match self.market {
            Some(market) => match o.price(market) {
                Some(p) => Some(p),
                None => return false,
            },
            None => o.list_price(),
        };
        if let Some(max) = self.max_price
            && price.is_none_or(|p| p > max)
        {
            return false;
        }
        self.provider.as_ref().is_none_or(|p| &o.key.provider == p)
            && self.region.as_ref().is_none_or(|r| &o.key.region == r)
            && self
                .gpu
                .as_ref()
                .is_none_or(|g| o.spec.gpu.eq_ignore_ascii_case(g))
            && self.min_gpus.is_none_or(|n| o.spec.gpu_count >= n)
            && self
                .min_gpu_memory_gib
                .is_none_or(|m| o.spec.gpu_memory_gib >= m)
    }
}

impl CatalogSnapshot {
    /// Offerings matching `q`, cheapest first, at most `q.limit` of them.
    pub fn query(&self, q: &OfferingQuery) -> OfferingPage<'_> {
        let limit = q.limit.max(1);
        let after = q.after.map(|c| (c.price, c.id));
        let candidates = self.candidates(q.gpu.as_deref(), q.provider.as_deref());
        let mut matched: Vec<&Offering> = candidates
            .iter()
            .map(|&i| self.at(i))
            .filter(|o| q.matches(o))
            .collect();
        // Candidates are in list-price order already; only a market filter changes the key.
        if q.market.is_some() {
            matched.sort_by_key(|o| q.sort_key(o));
        }
        let start = match after {
            Some(after) => matched.partition_point(|o| q.sort_key(o) <= after),
            None => 0,
        };
        let mut items: Vec<&Offering> = matched[start..].iter().take(limit + 1).copied().collect();
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|o| {
                let (price, id) = q.sort_key(o);
                PageCursor { price, id }
            })
        } else {
            None
        };
        OfferingPage { items, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::catalog::{Interconnect, ProviderEntry};
    use crate::core::test_support::p4d;

    fn offering(
        id: i64,
        provider: &str,
        gpu: &str,
        count: f64,
        od: Option<f64>,
        spot: Option<f64>,
    ) -> Offering {
        let gpu_memory_gib = match gpu {
            "A100-80GB" => 80.0,
            "T4" => 16.0,
            _ => 40.0,
        };
        p4d()
            .id(id)
            .at(provider, "r1")
            .instance_type(&format!("t{id}"))
            .gpus(gpu, count, gpu_memory_gib)
            .host(8.0, 64.0)
            .fabric(Interconnect::None, None)
            .local_nvme_gb(Some(0.0))
            .prices(od, spot)
            .observed_at_ms(0)
            .build()
    }

    fn snapshot() -> CatalogSnapshot {
        let providers = ["aws", "gcp"]
            .iter()
            .map(|p| ProviderEntry {
                name: p.to_string(),
                display_name: p.to_string(),
            })
            .collect();
        CatalogSnapshot::new(
            providers,
            vec![],
            vec![
                offering(1, "aws", "A100", 8.0, Some(30.0), Some(9.0)),
                offering(2, "gcp", "A100", 8.0, Some(20.0), Some(12.0)),
                offering(3, "aws", "A100", 1.0, Some(4.0), None),
                offering(4, "aws", "A100-80GB", 8.0, None, Some(15.0)),
                offering(5, "gcp", "T4", 1.0, Some(0.5), Some(0.2)),
                offering(6, "gcp", "A100", 8.0, None, None),
            ],
        )
    }

    fn ids(page: &OfferingPage<'_>) -> Vec<i64> {
        page.items.iter().map(|o| o.id).collect()
    }

    #[test]
    fn filters_by_gpu_case_insensitively_and_sorts_by_list_price() {
        let s = snapshot();
        let q = OfferingQuery {
            gpu: Some("a100".into()),
            min_gpus: Some(8.0),
            limit: 10,
            ..Default::default()
        };
        // 2 ($20) before 1 ($30); unpriced 6 last; A100-80GB is a different model.
        assert_eq!(ids(&s.query(&q)), vec![2, 1, 6]);
    }

    #[test]
    fn market_filter_sorts_by_that_market_and_drops_unpriced() {
        let s = snapshot();
        let q = OfferingQuery {
            market: Some(Market::Spot),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(ids(&s.query(&q)), vec![5, 1, 2, 4]);
    }

    #[test]
    fn max_price_and_memory_filters_apply_to_the_chosen_price() {
        let s = snapshot();
        let q = OfferingQuery {
            market: Some(Market::Spot),
            max_price: Some(Micros::from_dollars(12.0).unwrap()),
            min_gpu_memory_gib: Some(40.0),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(ids(&s.query(&q)), vec![1, 2]);
        let q = OfferingQuery {
            provider: Some("aws".into()),
            max_price: Some(Micros(5_000_000)),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(ids(&s.query(&q)), vec![3]);
    }

    #[test]
    fn pages_follow_each_other_without_gaps_or_repeats() {
        let s = snapshot();
        let mut q = OfferingQuery {
            limit: 2,
            ..Default::default()
        };
        let mut seen = vec![];
        loop {
            let page = s.query(&q);
            seen.extend(ids(&page));
            match page.next {
                Some(c) => q.after = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, vec![5, 3, 4, 2, 1, 6]);
    }
}
