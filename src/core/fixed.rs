//! Numbers with a fixed count of decimals for the reasons people read, written exactly as
//! `format!("{x:.2}")` writes them, faster.
//!
//! The standard library finds the correctly rounded digits with Grisu and, when Grisu cannot
//! decide, with big-number arithmetic (Dragon4). A selection writes over a hundred such
//! numbers and that search was a fifth of its time. Here the value is scaled by a power of
//! ten in one rounded multiplication: the rounding error is below half an ulp of the scaled
//! value, so unless the scaled value lies within a few ulps of a half, rounding it to an
//! integer gives the same digits as the exact decimal expansion would. The rare values that
//! close to a tie, and anything too large, too precise or not finite, go to the standard
//! library, so the text is the same byte for byte.

use std::fmt::{self, Write};

use super::text::Piece;

/// Powers of ten that are exact in an `f64`.
const POW10: [f64; 10] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
/// Scaled values from here on have ulps too large to tell halves apart; 2^52 would do, a
/// rounder bound costs nothing.
const LARGEST_SCALED: f64 = 1e15;

/// `value` with `places` decimals, formatted as `{value:.places$}` would be. Width and
/// alignment flags of an enclosing format string are not applied.
#[derive(Debug, Clone, Copy)]
pub struct Fixed {
    value: f64,
    places: usize,
}

/// `value` with `places` decimals (at most 9 take the fast path).
pub fn fixed(value: f64, places: usize) -> Fixed {
    Fixed { value, places }
}

impl Fixed {
    /// Writes the text to `out`; `false`, with nothing written, where the standard library
    /// must write it.
    fn write_fast<W: Write>(&self, out: &mut W) -> Result<bool, fmt::Error> {
        let Some(units) = rounded_units(self.value, self.places) else {
            return Ok(false);
        };
        let places = self.places;
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(units);
        // The standard library keeps the sign of negative values that round to zero: -0.001
        // with two decimals is "-0.00".
        if self.value.is_sign_negative() {
            out.write_char('-')?;
        }
        // At least one digit before the point: 0.05 is "5" scaled, written "0.05".
        let integer_digits = digits.len().saturating_sub(places);
        if integer_digits == 0 {
            out.write_char('0')?;
        } else {
            out.write_str(&digits[..integer_digits])?;
        }
        if places > 0 {
            out.write_char('.')?;
            for _ in digits.len()..places {
                out.write_char('0')?;
            }
            out.write_str(&digits[integer_digits..])?;
        }
        Ok(true)
    }
}

impl fmt::Display for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.write_fast(f)? {
            Ok(())
        } else {
            write!(f, "{:.*}", self.places, self.value)
        }
    }
}

impl Piece for Fixed {
    fn push_to(&self, out: &mut String) {
        // Writing into a String cannot fail.
        if !matches!(self.write_fast(out), Ok(true)) {
            let _ = write!(out, "{:.*}", self.places, self.value);
        }
    }
}

/// `|value|` scaled by 10^`places` and rounded to an integer, or `None` where the standard
/// library must decide.
fn rounded_units(value: f64, places: usize) -> Option<u64> {
    let scale = *POW10.get(places)?;
    if !value.is_finite() {
        return None;
    }
    let scaled = value.abs() * scale;
    if scaled >= LARGEST_SCALED {
        return None;
    }
    let floor = scaled.floor();
    // Exact: both are below 2^53 and `floor` is `scaled` with its fraction bits cleared.
    let fraction = scaled - floor;
    // The product's error is at most half an ulp of `scaled` (2^-53 relative); four times
    // that leaves a margin on either side of the half.
    if (fraction - 0.5).abs() <= scaled * (4.0 * f64::EPSILON) {
        return None;
    }
    Some(floor as u64 + u64::from(fraction > 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both ways of writing: through `Display` and pushed as a [`Piece`].
    fn same_as_std(value: f64, places: usize) {
        let expected = format!("{value:.places$}");
        assert_eq!(
            fixed(value, places).to_string(),
            expected,
            "{value:e} with {places} decimals"
        );
        let mut pushed = String::from("·");
        fixed(value, places).push_to(&mut pushed);
        assert_eq!(pushed, format!("·{expected}"), "{value:e} pushed");
    }

    #[test]
    fn ties_zeros_signs_and_edges_match_the_standard_library() {
        let values = [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -2.5,
            0.125,
            0.375,
            1.005,
            2.675,
            0.045,
            7.347,
            1234.4,
            0.001,
            -0.001,
            -0.004,
            0.0049999,
            0.995,
            9.995,
            99.995,
            999.5,
            1e-300,
            5e-324,
            1e14,
            1e15,
            1e16,
            4.5e15,
            123_456_789.987_654_33,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for v in values {
            for places in 0..=12 {
                same_as_std(v, places);
            }
        }
    }

    #[test]
    fn every_cent_and_tenth_up_to_ten_thousand_matches() {
        for i in 0..1_000_000u32 {
            let v = f64::from(i) / 100.0;
            same_as_std(v, 0);
            same_as_std(v, 1);
            same_as_std(v, 2);
            same_as_std(v + 0.005, 2);
            same_as_std(v + 0.05, 1);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200_000))]

        #[test]
        fn any_bits_match(bits in any::<u64>(), places in 0usize..=10) {
            same_as_std(f64::from_bits(bits), places);
        }

        #[test]
        fn everyday_magnitudes_match(v in -1e7f64..1e7, places in 0usize..=6) {
            same_as_std(v, places);
        }
    }
}
