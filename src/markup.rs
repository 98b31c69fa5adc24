//! Markup by type, for the fleet page and the SVG charts (SVG is XML, which needs the same
//! escaping). Outside `api` so the simulator's chart can use it without depending on HTTP.
//! [`Html`] is markup this program wrote itself; anything else reaches a page only through
//! [`escape`], whose [`Escaped`] writes its text with `&`, `<`, `>`, `"` and `'` replaced. The
//! [`html!`](crate::markup::html) macro formats into `Html` and accepts only arguments that
//! are [`Markup`] (`Html`, `Escaped` and numbers), so putting a pool name or a cloud's message
//! into the page unescaped does not compile.
//!
//! Its format string must be a literal: it is passed through `concat!`, which makes `format!`
//! refuse inline captures such as `{name}`, the one way an unchecked argument could slip in.
//!
//! Written here rather than taken from a crate: escaping is a dozen lines, and the crates that
//! do it (`html-escape`, `v_htmlescape`) escape strings but give no type that keeps raw text
//! out of a page, which is the point.

use std::fmt::{self, Display, Write};

/// Markup written by this program, safe to put into a page as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    pub fn with_capacity(capacity: usize) -> Self {
        Self(String::with_capacity(capacity))
    }

    /// Markup from a literal in this source. Only `&'static str` is taken so that text read
    /// at run time does not get here by accident.
    pub fn lit(markup: &'static str) -> Self {
        Self(markup.to_owned())
    }

    /// Output of `format!` whose arguments were all [`Markup`]; used by [`html!`] only.
    #[doc(hidden)]
    pub fn from_checked_format(formatted: String) -> Self {
        Self(formatted)
    }

    /// Appends markup (or escaped text).
    pub fn push(&mut self, part: impl Markup) {
        // Writing to a String cannot fail.
        let _ = write!(self.0, "{part}");
    }

    /// Appends a literal piece of markup.
    pub fn push_lit(&mut self, markup: &'static str) {
        self.0.push_str(markup);
    }

    /// The parts with `separator` between them.
    pub fn join(parts: impl IntoIterator<Item = Html>, separator: &'static str) -> Html {
        let mut out = Html::default();
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                out.push_lit(separator);
            }
            out.push(part);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl Display for Html {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text shown as text: formatting it writes the text escaped for element content and quoted
/// attribute values (and SVG, which is XML).
#[derive(Debug, Clone, Copy)]
pub struct Escaped<T>(pub T);

/// `text` as text in a page.
pub fn escape<T: Display>(text: T) -> Escaped<T> {
    Escaped(text)
}

impl<T: Display> Escaped<T> {
    /// The escaped text as markup, to keep or to pass on.
    pub fn html(&self) -> Html {
        Html(self.to_string())
    }
}

impl<T: Display> Display for Escaped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(EscapingWriter(f), "{}", self.0)
    }
}

/// Passes text on to the formatter with the five characters replaced.
struct EscapingWriter<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for EscapingWriter<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
            self.0.write_str(&rest[..i])?;
            self.0.write_str(match rest.as_bytes()[i] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[i + 1..];
        }
        self.0.write_str(rest)
    }
}

/// What may be put into markup as it is: markup, escaped text, and numbers (whose digits,
/// signs and points need no escaping).
pub trait Markup: Display {}

impl Markup for Html {}
impl<T: Display> Markup for Escaped<T> {}
impl<T: Markup + ?Sized> Markup for &T {}
impl Markup for u32 {}
impl Markup for u64 {}
impl Markup for i64 {}
impl Markup for usize {}
impl Markup for f64 {}

/// Checks that an argument of [`html!`] is [`Markup`]; used by the macro only.
#[doc(hidden)]
pub fn markup<T: Markup + ?Sized>(part: &T) -> &T {
    part
}

/// `format!` into [`Html`], with every argument [`Markup`] and no inline captures.
macro_rules! html {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        $crate::markup::Html::from_checked_format(
            format!(concat!($fmt) $(, $crate::markup::markup(&$arg))*)
        )
    };
}
pub(crate) use html;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_the_five_characters() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#).to_string(),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain ü").to_string(), "plain ü");
        // Anything displayable is escaped, not only strings.
        assert_eq!(
            escape(serde_json::json!({"a": "<"})).to_string(),
            "{&quot;a&quot;:&quot;&lt;&quot;}"
        );
    }

    #[test]
    fn the_macro_escapes_text_and_keeps_markup() {
        let name = "<script>alert(1)</script>";
        let cell = html!("<td>{}</td><td>{:.1}</td>", escape(name), 2.26);
        assert_eq!(
            cell.as_str(),
            "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>2.3</td>"
        );
        let row = html!("<tr>{}</tr>", cell);
        assert!(row.as_str().starts_with("<tr><td>&lt;script&gt;"));
        assert_eq!(
            Html::join([Html::lit("<b>a</b>"), escape("<b>").html()], ", ").as_str(),
            "<b>a</b>, &lt;b&gt;"
        );
    }
}
