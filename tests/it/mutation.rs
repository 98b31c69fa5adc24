//! Byte-level mutations of real inputs for the `*_fuzz` property tests: bit flips, inserted
//! and deleted bytes, truncation, duplicated chunks and tokens that parsers tend to mishandle
//! (`inf`, `NaN`, huge numbers, delimiters). Starting from a valid fixture keeps most cases
//! deep inside the parser, where arbitrary bytes rarely reach.

use proptest::prelude::*;

use crate::common::{TestApp, header_text};

/// Texts that sit at the edges of number parsing and of the formats we read.
const TOKENS: &[&str] = &[
    "inf",
    "-inf",
    "NaN",
    "infinity",
    "-1",
    "-0",
    "0",
    "1e999",
    "-1e999",
    "1e-999",
    "99999999999999999999999999999999999999999999",
    // Past f64's range (about 1.8e308) without exponent notation: parses to infinity.
    "99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "1.7976931348623157e308",
    "18446744073709551616",
    "4294967296",
    "\"",
    ",",
    "\n",
    "\r\n",
    "<",
    ">",
    "</",
    "&amp;",
    "{",
    "}",
    "[",
    "]",
    ":",
    "null",
    "\u{0}",
    "\u{feff}",
    "é",
];

/// One edit: what to do, where (taken modulo the length) and with which byte or token.
#[derive(Debug, Clone)]
pub struct Edit {
    kind: u8,
    at: usize,
    byte: u8,
    len: usize,
}

fn edit() -> impl Strategy<Value = Edit> {
    (0u8..6, any::<usize>(), any::<u8>(), 1usize..64).prop_map(|(kind, at, byte, len)| Edit {
        kind,
        at,
        byte,
        len,
    })
}

/// Up to `max` edits.
pub fn edits(max: usize) -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 1..=max)
}

/// `input` with `edits` applied in order.
pub fn apply(input: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = input.to_vec();
    for e in edits {
        let at = if out.is_empty() {
            0
        } else {
            e.at % (out.len() + 1)
        };
        match e.kind {
            // Flip one bit.
            0 if !out.is_empty() => {
                let i = at.min(out.len() - 1);
                out[i] ^= 1 << (e.byte % 8);
            }
            // Insert one byte.
            1 => out.insert(at, e.byte),
            // Delete a run of bytes.
            2 => {
                let end = (at + e.len).min(out.len());
                out.drain(at..end);
            }
            // Truncate.
            3 => out.truncate(at),
            // Duplicate a chunk in place (repeated rows, elements, fields).
            4 => {
                let end = (at + e.len).min(out.len());
                let chunk = out[at..end].to_vec();
                out.splice(at..at, chunk);
            }
            // Replace a run with a token.
            _ => {
                let token = TOKENS[e.byte as usize % TOKENS.len()].as_bytes();
                let end = (at + e.len % 8).min(out.len());
                out.splice(at..end, token.iter().copied());
            }
        }
    }
    out
}

/// Mutations of `input` as text (lossy where an edit broke UTF-8, as an HTTP body read as a
/// string would be rejected or decoded).
pub fn apply_text(input: &str, edits: &[Edit]) -> String {
    String::from_utf8_lossy(&apply(input.as_bytes(), edits)).into_owned()
}

/// The byte ranges of `text`'s number-looking runs (a digit, then digits and dots).
fn number_runs(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

/// Only the number-like tokens: a delimiter here would just be another truncation.
const NUMBER_TOKENS: usize = 15;

/// Replaces the `nth` number-looking run of `text` (modulo how many there are) with a token.
pub fn replace_number(text: &str, nth: usize, token_index: usize) -> String {
    let runs = number_runs(text);
    if runs.is_empty() {
        return text.to_string();
    }
    let (start, end) = runs[nth % runs.len()];
    format!(
        "{}{}{}",
        &text[..start],
        TOKENS[token_index % NUMBER_TOKENS],
        &text[end..]
    )
}

/// Every `(nth, token)` pair `replace_number` can make of `text`: each number run once with
/// each number-like token, so a test can try them all instead of sampling a few.
pub fn number_edits(text: &str) -> impl Iterator<Item = (usize, usize)> {
    let runs = number_runs(text).len();
    (0..runs).flat_map(|nth| (0..NUMBER_TOKENS).map(move |token| (nth, token)))
}

#[test]
fn edits_change_the_input_in_the_documented_ways() {
    let flip = Edit {
        kind: 0,
        at: 0,
        byte: 0,
        len: 1,
    };
    assert_eq!(apply(b"a", &[flip]), b"`");
    let insert = Edit {
        kind: 1,
        at: 1,
        byte: b'x',
        len: 1,
    };
    assert_eq!(apply(b"ab", &[insert]), b"axb");
    let delete = Edit {
        kind: 2,
        at: 1,
        byte: 0,
        len: 2,
    };
    assert_eq!(apply(b"abcd", &[delete]), b"ad");
    let truncate = Edit {
        kind: 3,
        at: 2,
        byte: 0,
        len: 1,
    };
    assert_eq!(apply(b"abcd", &[truncate]), b"ab");
    let dup = Edit {
        kind: 4,
        at: 0,
        byte: 0,
        len: 2,
    };
    assert_eq!(apply(b"abc", &[dup]), b"ababc");
    let token = Edit {
        kind: 5,
        at: 0,
        byte: 0,
        len: 1,
    };
    assert_eq!(apply(b"x", &[token]), b"inf");
    assert_eq!(replace_number("a,1.5,b,20", 1, 7), "a,1.5,b,1e999");
    assert_eq!(
        TOKENS[NUMBER_TOKENS - 1],
        "4294967296",
        "the number tokens come first"
    );
    // Two number runs, each with every number token.
    let pairs: Vec<(usize, usize)> = number_edits("a,1.5,b,20").collect();
    assert_eq!(pairs.len(), 2 * NUMBER_TOKENS);
    assert_eq!(pairs[NUMBER_TOKENS], (1, 0));
}

/// `n` values of `strategy` from a fixed seed, for HTTP checks that run outside proptest's
/// runner (an async server per case would be too slow to shrink over).
pub fn samples<S: Strategy>(strategy: S, n: usize) -> Vec<S::Value> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .expect("a value of the strategy")
                .current()
        })
        .collect()
}

/// POSTs each body to `path` with `headers`, holds every answer to [`assert_handled`], and
/// returns how many were refused (4xx): callers check some were, or the bodies were not
/// mutated enough to prove anything.
pub async fn post_each(
    app: &TestApp,
    path: &str,
    headers: &[(&str, &str)],
    bodies: impl IntoIterator<Item = Vec<u8>>,
) -> usize {
    let mut rejected = 0;
    for (i, body) in bodies.into_iter().enumerate() {
        let mut request = app.client.post(app.url(path)).body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("POST");
        if assert_handled(response, &format!("{path}, body {i}")).await >= 400 {
            rejected += 1;
        }
    }
    rejected
}

/// Asserts `response` is a success or a 4xx problem document, never a 5xx; returns its status.
pub async fn assert_handled(response: reqwest::Response, what: &str) -> u16 {
    let status = response.status().as_u16();
    let content_type = header_text(&response, "content-type");
    let body = response.text().await.unwrap_or_default();
    assert!(status < 500, "{what}: {status} {body}");
    if status >= 400 {
        assert_eq!(content_type, "application/problem+json", "{what}: {body}");
        let problem: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{what}: problem body is not JSON ({e}): {body}"));
        assert_eq!(problem["status"], status, "{what}: {body}");
        assert!(
            problem["errors"]
                .as_array()
                .is_some_and(|errors| errors.iter().all(|e| e["field"].is_string())),
            "{what}: every problem names its field: {body}"
        );
    }
    status
}
