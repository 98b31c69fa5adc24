//! Small helpers for reading Query API XML with quick-xml's serde support: AWS wraps every
//! list in an element of its own (`<item>` in EC2, `<member>` in Auto Scaling), and sends empty
//! elements where a value is absent.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::provider::{ProviderError, ProviderResult};

/// An EC2 list: `<fooSet><item>…</item>…</fooSet>`.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct Items<T> {
    #[serde(rename = "item", default = "Vec::new")]
    pub item: Vec<T>,
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Self { item: Vec::new() }
    }
}

/// An Auto Scaling list: `<Foo><member>…</member>…</Foo>`.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct Members<T> {
    #[serde(rename = "member", default = "Vec::new")]
    pub member: Vec<T>,
}

impl<T> Default for Members<T> {
    fn default() -> Self {
        Self { member: Vec::new() }
    }
}

/// Parses a successful response body; a body that does not match is the cloud's fault (or a
/// proxy's), so it becomes [`ProviderError::Other`] naming the action.
pub fn parse<T: DeserializeOwned>(action: &str, body: &str) -> ProviderResult<T> {
    quick_xml::de::from_str(body)
        .map_err(|e| ProviderError::Other(format!("cannot read the {action} response: {e}")))
}

/// A present, non-blank value: AWS sends `<nextToken/>` on the last page.
pub fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Epoch milliseconds of an ISO 8601 timestamp as AWS writes them (`2026-01-06T04:32:53.000Z`).
pub fn time_ms(text: &str) -> Option<i64> {
    crate::timefmt::parse_rfc3339_ms(text.trim()).ok()
}
