//! Text written piece by piece into one `String`, for the reasons a selection gives.
//!
//! Each candidate's reasons hold a few dozen figures. Written with `format!`, every figure
//! went through the formatting machinery (`fmt::Arguments`, a `Formatter`, a virtual call
//! per piece) and each reason grew its own string by reallocation: the reasons were a fifth
//! of a whole selection's time, much of it in that machinery. [`push!`] appends each piece
//! directly, and the pieces write exactly what their `Display` would.

use std::fmt::Write;

/// Something [`push!`] can append.
pub trait Piece {
    fn push_to(&self, out: &mut String);
}

impl Piece for str {
    fn push_to(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl Piece for String {
    fn push_to(&self, out: &mut String) {
        out.push_str(self);
    }
}

impl<T: Piece + ?Sized> Piece for &T {
    fn push_to(&self, out: &mut String) {
        (**self).push_to(out);
    }
}

macro_rules! integer_pieces {
    ($($t:ty),*) => {$(
        impl Piece for $t {
            fn push_to(&self, out: &mut String) {
                out.push_str(itoa::Buffer::new().format(*self));
            }
        }
    )*};
}

integer_pieces!(u32, u64, usize);

/// A float written as `{}` writes it: the shortest digits that read back the same.
#[derive(Debug, Clone, Copy)]
pub struct Shortest(pub f64);

/// Whole numbers below this are written as integers: every one of them is exact in an `f64`,
/// so its shortest digits are the integer's own.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

impl Piece for Shortest {
    fn push_to(&self, out: &mut String) {
        let v = self.0;
        // Most figures written this way are whole (GPU counts, billing seconds, datasheet
        // TFLOPS): itoa skips the float machinery. `-0.0` is written "-0", so it goes there.
        if v.fract() == 0.0 && v.abs() < EXACT_INTEGERS && !(v == 0.0 && v.is_sign_negative()) {
            out.push_str(itoa::Buffer::new().format(v as i64));
        } else {
            // Writing into a String cannot fail.
            let _ = write!(out, "{v}");
        }
    }
}

/// Appends every piece to `out` (a `&mut String`), in order.
macro_rules! push {
    ($out:expr, $($piece:expr),+ $(,)?) => {{
        let out: &mut String = $out;
        $($crate::core::text::Piece::push_to(&$piece, out);)+
    }};
}

pub(crate) use push;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_write_what_their_display_writes() {
        let mut out = String::new();
        let name = String::from("p4d");
        push!(
            &mut out,
            "rank ",
            3usize,
            " of ",
            1_299u64,
            ": ",
            name,
            " × ",
            8u32,
            ", ",
            Shortest(0.1 + 0.2),
            " ",
            Shortest(8.0),
            " ",
            Shortest(1e21),
        );
        assert_eq!(
            out,
            format!(
                "rank 3 of 1299: p4d × 8, {} {} {}",
                0.1 + 0.2,
                8.0f64,
                1e21f64
            )
        );
        assert_eq!(
            out,
            "rank 3 of 1299: p4d × 8, 0.30000000000000004 8 1000000000000000000000"
        );
    }

    #[test]
    fn whole_numbers_are_written_as_display_writes_them() {
        let edges = [
            0.0,
            -0.0,
            1.0,
            -3.0,
            60.0,
            1e15,
            -1e15,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            -9_007_199_254_740_991.0,
            1e300,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            0.5,
            -2.5,
        ];
        for v in edges {
            let mut out = String::new();
            push!(&mut out, Shortest(v));
            assert_eq!(out, format!("{v}"), "{v:e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_float_is_written_as_display_writes_it(bits: u64, whole: i64) {
            for v in [f64::from_bits(bits), whole as f64, (whole >> 11) as f64] {
                let mut out = String::new();
                push!(&mut out, Shortest(v));
                proptest::prop_assert_eq!(out, format!("{v}"));
            }
        }
    }
}
