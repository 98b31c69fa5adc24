//! One SQL statement with its arguments, written once and run on either backend. Both engines
//! accept `$N` placeholders, so the text is shared; the arguments are kept as portable values
//! that each backend binds when it runs the statement ([`Backend::execute`] and the fetches).
//!
//! Why not sqlx's `query(..).bind(..)` in the generic code: its bounds (every bound type
//! encodes for the engine, the engine's connection is an executor) are not implied by a
//! trait bound, so each generic function would have to restate them all. These few value
//! kinds are bound by [`arguments`], which states those bounds once and is called with a
//! concrete engine by each backend, where they are checked.
//!
//! [`Backend::execute`]: super::backend::Backend::execute

use std::borrow::Cow;
use std::fmt::Write as _;

use sqlx::{Arguments as _, Database, Encode, Type};

/// A value for one placeholder. Each variant binds as the Rust type it holds, so PostgreSQL
/// is told the same parameter types as when the value is bound directly with sqlx.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Arg<'q> {
    /// `BIGINT`/`INTEGER` (`i64`).
    Int(Option<i64>),
    /// PostgreSQL `INTEGER` (`i32`).
    Int4(Option<i32>),
    Real(Option<f64>),
    Bool(Option<bool>),
    Text(Option<Cow<'q, str>>),
    Bytes(Option<&'q [u8]>),
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Self::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Self::Int(v)
    }
}

impl From<i32> for Arg<'_> {
    fn from(v: i32) -> Self {
        Self::Int4(Some(v))
    }
}

impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Self::Real(Some(v))
    }
}

impl From<Option<f64>> for Arg<'_> {
    fn from(v: Option<f64>) -> Self {
        Self::Real(v)
    }
}

impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Self::Bool(Some(v))
    }
}

impl<'q> From<&'q str> for Arg<'q> {
    fn from(v: &'q str) -> Self {
        Self::Text(Some(Cow::Borrowed(v)))
    }
}

impl<'q> From<&'q String> for Arg<'q> {
    fn from(v: &'q String) -> Self {
        Self::Text(Some(Cow::Borrowed(v)))
    }
}

impl From<String> for Arg<'_> {
    fn from(v: String) -> Self {
        Self::Text(Some(Cow::Owned(v)))
    }
}

impl<'q> From<&'q Option<String>> for Arg<'q> {
    fn from(v: &'q Option<String>) -> Self {
        Self::Text(v.as_deref().map(Cow::Borrowed))
    }
}

impl<'q> From<&'q [u8]> for Arg<'q> {
    fn from(v: &'q [u8]) -> Self {
        Self::Bytes(Some(v))
    }
}

impl<'q> From<&'q Vec<u8>> for Arg<'q> {
    fn from(v: &'q Vec<u8>) -> Self {
        Self::Bytes(Some(v))
    }
}

/// SQL text and the values of its placeholders, in order: the Nth value is `$N`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stmt<'q> {
    sql: Cow<'q, str>,
    args: Vec<Arg<'q>>,
}

impl<'q> Stmt<'q> {
    pub fn new(sql: impl Into<Cow<'q, str>>) -> Self {
        Self {
            sql: sql.into(),
            args: Vec::new(),
        }
    }

    /// Gives the next placeholder (`$1`, then `$2`, ...) its value.
    pub fn bind(mut self, value: impl Into<Arg<'q>>) -> Self {
        self.args.push(value.into());
        self
    }

    /// Appends text, for statements built from parts.
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.to_mut().push_str(sql);
        self
    }

    /// Appends a placeholder for `value`.
    pub fn push_bind(&mut self, value: impl Into<Arg<'q>>) -> &mut Self {
        self.args.push(value.into());
        let n = self.args.len();
        // Writing to a String cannot fail.
        let _ = write!(self.sql.to_mut(), "${n}");
        self
    }

    /// Appends `(..)` with a placeholder per value: the list of an `IN`.
    pub fn push_list<V: Into<Arg<'q>>>(
        &mut self,
        values: impl IntoIterator<Item = V>,
    ) -> &mut Self {
        self.push("(");
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push_bind(value);
        }
        self.push(")")
    }

    /// Appends `VALUES (..), (..)` with one tuple per item, whose values `tuple` binds.
    pub fn push_values<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut tuple: impl FnMut(&mut Tuple<'_, 'q>, T),
    ) -> &mut Self {
        self.push("VALUES ");
        for (i, item) in items.into_iter().enumerate() {
            self.push(if i == 0 { "(" } else { ", (" });
            tuple(
                &mut Tuple {
                    stmt: self,
                    first: true,
                },
                item,
            );
            self.push(")");
        }
        self
    }

    #[cfg(test)]
    pub fn sql(&self) -> &str {
        &self.sql
    }

    pub fn into_parts(self) -> (Cow<'q, str>, Vec<Arg<'q>>) {
        (self.sql, self.args)
    }
}

/// Binds a statement's values for engine `DB`, each as the Rust type it holds. Called with a
/// concrete engine by each backend, so the bounds below are checked there and nowhere else.
pub(super) fn arguments<'q, DB>(args: Vec<Arg<'q>>) -> Result<DB::Arguments<'q>, sqlx::Error>
where
    DB: Database,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    Option<i32>: Encode<'q, DB> + Type<DB>,
    Option<f64>: Encode<'q, DB> + Type<DB>,
    Option<bool>: Encode<'q, DB> + Type<DB>,
    Option<Cow<'q, str>>: Encode<'q, DB> + Type<DB>,
    Option<&'q [u8]>: Encode<'q, DB> + Type<DB>,
{
    let mut out = DB::Arguments::default();
    for arg in args {
        match arg {
            Arg::Int(v) => out.add(v),
            Arg::Int4(v) => out.add(v),
            Arg::Real(v) => out.add(v),
            Arg::Bool(v) => out.add(v),
            Arg::Text(v) => out.add(v),
            Arg::Bytes(v) => out.add(v),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(out)
}

/// The values of one row of [`Stmt::push_values`].
pub(super) struct Tuple<'s, 'q> {
    stmt: &'s mut Stmt<'q>,
    first: bool,
}

impl<'q> Tuple<'_, 'q> {
    pub fn bind(&mut self, value: impl Into<Arg<'q>>) -> &mut Self {
        if !std::mem::take(&mut self.first) {
            self.stmt.push(", ");
        }
        self.stmt.push_bind(value);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_follow_the_values_already_bound() {
        let mut s = Stmt::new("SELECT * FROM t WHERE a = $1").bind(1_i64);
        s.push(" AND b = ")
            .push_bind("x")
            .push(" LIMIT ")
            .push_bind(5_i64);
        assert_eq!(s.sql(), "SELECT * FROM t WHERE a = $1 AND b = $2 LIMIT $3");
        let (_, args) = s.into_parts();
        assert_eq!(
            args,
            [
                Arg::Int(Some(1)),
                Arg::Text(Some("x".into())),
                Arg::Int(Some(5))
            ]
        );
    }

    #[test]
    fn rows_of_values_are_separated_and_numbered_in_order() {
        let mut s = Stmt::new("INSERT INTO t (a, b) ");
        s.push_values([(1_i64, "p"), (2, "q")], |t, (a, b)| {
            t.bind(a).bind(b);
        });
        s.push(" ON CONFLICT DO NOTHING");
        assert_eq!(
            s.sql(),
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4) ON CONFLICT DO NOTHING"
        );
        assert_eq!(s.into_parts().1.len(), 4);
    }

    #[test]
    fn nulls_keep_their_type() {
        let none: Option<String> = None;
        assert_eq!(Arg::from(&none), Arg::Text(None));
        assert_eq!(Arg::from(None::<i64>), Arg::Int(None));
        assert_eq!(Arg::from(None::<f64>), Arg::Real(None));
    }
}
