//! One thing wrong with one field of what a client sent. Input checks below the HTTP layer
//! (policies, simulator files) report in this shape; `api::error` turns a list of them into a
//! 422 problem document.

use serde::Serialize;
use utoipa::ToSchema;

/// One thing wrong with one field of the request.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    /// Where: a query parameter (`min_gpus`), a JSON path (`observations[2].price`), a path
    /// segment (`provider`), or `body`.
    pub field: String,
    /// What is wrong with it, in words.
    pub problem: String,
    /// For uploaded files: the 1-based line at fault (the header is line 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}
