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

impl Piece for Shortest {
    fn push_to(&self, out: &mut String) {
        // Writing into a String cannot fail.
        let _ = write!(out, "{}", self.0);
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
}
