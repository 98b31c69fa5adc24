//! What a pool costs: hourly prices of its instance types from the catalog, the spend of its
//! workers so far in the UTC day, and the projected spend of a target for the rest of the day.

use super::catalog::{CatalogSnapshot, Market};
use super::policy::Policy;

pub const DAY_MS: i64 = 86_400_000;
const HOUR_MS: f64 = 3_600_000.0;

/// Hourly prices of the pool's instance types in its region, by zone.
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    /// (instance type, market) -> (zone, dollars per hour). A pool has a handful of types, so
    /// a list searched by `&str` beats a map whose lookups would allocate a key.
    prices: Vec<((String, Market), ZonePrices)>,
}

/// (zone, dollars per hour); the zone is empty for a region-wide price.
type ZonePrices = Vec<(String, f64)>;

impl PriceBook {
    /// The latest prices of `policy`'s instance types in its provider and region.
    pub fn for_policy(catalog: &CatalogSnapshot, policy: &Policy) -> Self {
        let mut book = Self::default();
        for choice in &policy.instance_types {
            for o in catalog.offerings_for_pool(&policy.provider, &choice.instance_type) {
                if o.key.region != policy.region {
                    continue;
                }
                for market in [Market::OnDemand, Market::Spot] {
                    if let Some(p) = o.price(market) {
                        book.insert(&choice.instance_type, market, &o.key.zone, p.dollars());
                    }
                }
            }
        }
        book
    }

    fn zones_mut(&mut self, instance_type: &str, market: Market) -> &mut ZonePrices {
        let at = match self
            .prices
            .iter()
            .position(|((t, m), _)| t == instance_type && *m == market)
        {
            Some(i) => i,
            None => {
                self.prices
                    .push(((instance_type.to_string(), market), Vec::new()));
                self.prices.len() - 1
            }
        };
        &mut self.prices[at].1
    }

    fn zones(&self, instance_type: &str, market: Market) -> Option<&[(String, f64)]> {
        self.prices
            .iter()
            .find(|((t, m), _)| t == instance_type && *m == market)
            .map(|(_, z)| z.as_slice())
    }

    pub fn insert(&mut self, instance_type: &str, market: Market, zone: &str, dollars: f64) {
        self.zones_mut(instance_type, market)
            .push((zone.to_string(), dollars));
    }

    /// Sets the price in `zone`, or in every zone of the type and market when `zone` is
    /// `None` (a region-wide price when none is known yet).
    pub fn set(&mut self, instance_type: &str, market: Market, zone: Option<&str>, dollars: f64) {
        let zones = self.zones_mut(instance_type, market);
        match zone {
            Some(z) => match zones.iter_mut().find(|(zz, _)| zz == z) {
                Some(entry) => entry.1 = dollars,
                None => zones.push((z.to_string(), dollars)),
            },
            None if zones.is_empty() => zones.push((String::new(), dollars)),
            None => zones.iter_mut().for_each(|e| e.1 = dollars),
        }
    }

    /// The price in `zone` when the catalog has one there, else the cheapest in the region;
    /// spot falls back to on-demand, which is what a spot request costs at most.
    pub fn price(&self, instance_type: &str, market: Market, zone: Option<&str>) -> Option<f64> {
        let of = |m: Market| {
            let zones = self.zones(instance_type, m)?;
            zone.and_then(|z| zones.iter().find(|(zz, _)| zz == z).map(|(_, p)| *p))
                .or_else(|| zones.iter().map(|(_, p)| *p).reduce(f64::min))
        };
        of(market).or_else(|| {
            if market == Market::Spot {
                of(Market::OnDemand)
            } else {
                None
            }
        })
    }
}

/// Dollars rounded to the cent, for answers people read. Never `-0.0`: Rust sums an empty
/// list of floats to `-0.0`, and a tiny negative rounds to it, which JSON would show as
/// `-0.0` and a page as `$-0.00`.
pub fn round_cents(x: f64) -> f64 {
    let cents = (x * 100.0).round() / 100.0;
    if cents == 0.0 { 0.0 } else { cents }
}

/// The start of the UTC day that `now_ms` falls in.
pub fn day_start(now_ms: i64) -> i64 {
    now_ms - now_ms.rem_euclid(DAY_MS)
}

/// Dollars for running at `per_hour` from `from_ms` to `to_ms`, counted only inside today.
pub fn spend_today(per_hour: f64, from_ms: i64, to_ms: i64, now_ms: i64) -> f64 {
    let start = from_ms.max(day_start(now_ms));
    let end = to_ms.min(now_ms);
    if end <= start {
        0.0
    } else {
        per_hour * (end - start) as f64 / HOUR_MS
    }
}

/// Hours left in the UTC day.
pub fn hours_left_today(now_ms: i64) -> f64 {
    (day_start(now_ms) + DAY_MS - now_ms) as f64 / HOUR_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounded_cents_are_never_negative_zero() {
        let empty: f64 = std::iter::empty::<f64>().sum();
        assert!(empty.is_sign_negative(), "Rust's empty float sum is -0.0");
        for x in [empty, -0.001, -0.0] {
            let r = round_cents(x);
            assert!(r == 0.0 && r.is_sign_positive(), "{x} -> {r:?}");
            assert_eq!(serde_json::to_string(&r).unwrap(), "0.0");
        }
        assert_eq!(round_cents(-0.006), -0.01);
        assert_eq!(round_cents(12.345), 12.35);
    }

    #[test]
    fn spend_counts_only_today() {
        let day = 20_000 * DAY_MS;
        let now = day + 10 * 3_600_000;
        // Started yesterday at 22:00: only the 10 hours since midnight count.
        assert!((spend_today(2.0, day - 2 * 3_600_000, now, now) - 20.0).abs() < 1e-9);
        assert!((hours_left_today(now) - 14.0).abs() < 1e-9);
        assert_eq!(spend_today(2.0, now + 1, now + 5, now), 0.0);
    }

    #[test]
    fn zone_price_then_cheapest_then_on_demand_for_spot() {
        let mut b = PriceBook::default();
        b.insert("g4dn.12xlarge", Market::OnDemand, "us-east-1a", 3.912);
        b.insert("g4dn.12xlarge", Market::OnDemand, "us-east-1b", 3.5);
        assert_eq!(
            b.price("g4dn.12xlarge", Market::OnDemand, Some("us-east-1a")),
            Some(3.912)
        );
        assert_eq!(
            b.price("g4dn.12xlarge", Market::OnDemand, Some("us-east-1f")),
            Some(3.5)
        );
        assert_eq!(b.price("g4dn.12xlarge", Market::Spot, None), Some(3.5));
        assert_eq!(b.price("p5.48xlarge", Market::OnDemand, None), None);
    }
}
