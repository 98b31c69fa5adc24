//! Exact money: prices are held as integer micro-dollars per hour.
//!
//! Floating-point sums drift; a price history compared for equality must not. Everything that
//! stores or compares a price uses [`Micros`]; only the JSON edge converts to and from dollars.

use serde::{Deserialize, Serialize};

/// US dollars × 1,000,000. One micro-dollar is far below any cloud's price granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Micros(pub i64);

/// Why a dollar amount cannot become a price.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("must be a finite number")]
    NotFinite,
    #[error("must be greater than zero")]
    NotPositive,
    #[error("must be at most {max} dollars per hour")]
    TooLarge { max: i64 },
}

/// No cloud instance lists above this; anything larger is a unit or typing mistake.
pub const MAX_DOLLARS_PER_HOUR: i64 = 100_000;

impl Micros {
    /// Converts dollars per hour into micro-dollars, rounding to the nearest micro-dollar.
    pub fn from_dollars(dollars: f64) -> Result<Self, PriceError> {
        if !dollars.is_finite() {
            return Err(PriceError::NotFinite);
        }
        if dollars <= 0.0 {
            return Err(PriceError::NotPositive);
        }
        if dollars > MAX_DOLLARS_PER_HOUR as f64 {
            return Err(PriceError::TooLarge {
                max: MAX_DOLLARS_PER_HOUR,
            });
        }
        let micros = (dollars * 1_000_000.0).round() as i64;
        // A positive amount below half a micro-dollar would be stored as a free instance.
        if micros == 0 {
            return Err(PriceError::NotPositive);
        }
        Ok(Self(micros))
    }

    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_round_trip_to_the_micro_dollar() {
        assert_eq!(Micros::from_dollars(21.95764), Ok(Micros(21_957_640)));
        assert_eq!(
            Micros::from_dollars(0.0000004),
            Err(PriceError::NotPositive)
        );
        assert_eq!(Micros(2_465_500).dollars(), 2.4655);
    }

    #[test]
    fn rejects_negative_zero_and_non_finite_prices() {
        assert_eq!(Micros::from_dollars(-1.0), Err(PriceError::NotPositive));
        assert_eq!(Micros::from_dollars(0.0), Err(PriceError::NotPositive));
        assert_eq!(Micros::from_dollars(f64::NAN), Err(PriceError::NotFinite));
        assert!(matches!(
            Micros::from_dollars(1e9),
            Err(PriceError::TooLarge { .. })
        ));
    }
}
