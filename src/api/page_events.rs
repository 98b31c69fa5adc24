//! The fleet page's event table: each event's detail in words rather than JSON. A scaling
//! reads `from → to workers` with the rules that fired, a reconciler step what it did to the
//! group, anything else each field as `name: value` (nested fields by their path). Every
//! value is escaped (the table is [`Html`]); long ones are cut on a character boundary.

use serde_json::Value;

use super::page::{scalar, tidy};
use crate::fleet::view::EventOut;
use crate::markup::{Html, escape, html};

/// Longest value shown inline; the full detail is in the JSON API.
const DETAIL_CHARS: usize = 120;

pub(super) fn events_table(out: &mut Html, events: &[EventOut]) {
    out.push_lit("<h3>Recent events</h3>\n");
    if events.is_empty() {
        out.push_lit("<p class=\"muted\">No events.</p>\n");
        return;
    }
    out.push_lit(
        "<table>\n<thead><tr><th scope=\"col\">At</th><th scope=\"col\">Kind</th>\
         <th scope=\"col\">Worker</th><th scope=\"col\">Instance type</th>\
         <th scope=\"col\">Detail</th></tr></thead>\n<tbody>\n",
    );
    for e in events {
        out.push(html!(
            "<tr><td><time datetime=\"{0}\">{0}</time></td><td>{1}</td><td>{2}</td><td>{3}</td>\
             <td>{4}</td></tr>\n",
            escape(&e.at),
            escape(&e.kind),
            escape(e.worker.as_deref().unwrap_or_default()),
            escape(e.instance_type.as_deref().unwrap_or_default()),
            event_detail(&e.detail),
        ));
    }
    out.push_lit("</tbody>\n</table>\n");
}

/// An event's detail in words.
fn event_detail(detail: &Value) -> Html {
    if let (Some(from), Some(to)) = (detail.get("from"), detail.get("to")) {
        let mut text = html!("{} &rarr; {} workers", scalar(from), scalar(to));
        let reasons: Vec<Html> = detail
            .get("reasons")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                let rule = r.get("rule").map(scalar)?;
                let why = r.get("detail").map(plain_text).unwrap_or_default();
                Some(html!("<code>{}</code> {}", rule, cut(&why)))
            })
            .collect();
        if !reasons.is_empty() {
            text.push(html!(": {}", Html::join(reasons, "; ")));
        }
        return text;
    }
    if let Some(step) = detail.get("step").filter(|s| s.get("step").is_some()) {
        return reconcile_step(step, detail.get("outcome"));
    }
    fields_text(detail)
}

/// Every scalar of a JSON value as `path: value`, comma separated.
fn fields_text(v: &Value) -> Html {
    let mut fields = Vec::new();
    flatten("", v, &mut fields);
    Html::join(
        fields
            .into_iter()
            .map(|(path, value)| html!("{}: {}", escape(&path), cut(&value))),
        ", ",
    )
}

/// (path, text) of every scalar in a JSON value; arrays of scalars joined by spaces.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let name = |k: &str| {
        if prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Null => {}
        Value::String(s) if s.is_empty() => {}
        Value::Object(o) => {
            for (k, v) in o {
                flatten(&name(k), v, out);
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            if !items.is_empty() {
                let text: Vec<String> = items.iter().map(plain).collect();
                out.push((prefix.to_owned(), text.join(" ")));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), item, out);
            }
        }
        other => out.push((prefix.to_owned(), plain(other))),
    }
}

/// A scalar JSON value as unescaped text.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map_or_else(
            || n.to_string(),
            |x| {
                let x = tidy(x);
                if x.fract() == 0.0 && x.abs() < 1e15 {
                    format!("{x:.0}")
                } else {
                    format!("{x}")
                }
            },
        ),
        other => other.to_string(),
    }
}

/// A JSON value as unescaped text, the way [`scalar`] shows it: strings without quotes,
/// arrays joined by spaces, nothing for null, anything else as JSON.
fn plain_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(plain_text).collect::<Vec<_>>().join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Text cut to [`DETAIL_CHARS`] characters (with an ellipsis when cut), escaped.
fn cut(text: &str) -> Html {
    let mut short: String = text.chars().take(DETAIL_CHARS).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    escape(short).html()
}

/// A reconciler step: what it set the group to, or which workers it terminated and why.
fn reconcile_step(step: &Value, outcome: Option<&Value>) -> Html {
    let mut text = match step.get("step").and_then(Value::as_str) {
        Some("set_capacity") => {
            let spec = &step["spec"];
            let mut t = html!(
                "set capacity to <strong>{}</strong> (bounds {} .. {})",
                scalar(&spec["desired"]),
                scalar(&spec["min"]),
                scalar(&spec["max"])
            );
            let targets: Vec<Html> = spec["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| {
                    html!(
                        "{} {} {}",
                        scalar(&x["count"]),
                        scalar(&x["instance_type"]),
                        scalar(&x["market"])
                    )
                })
                .collect();
            if !targets.is_empty() {
                t.push(html!(": {}", Html::join(targets, ", ")));
            }
            t
        }
        Some("terminate") => html!(
            "terminate {} ({})",
            scalar(&step["workers"]),
            scalar(&step["why"])
        ),
        _ => fields_text(step),
    };
    if let Some(o) = outcome.filter(|o| !o.is_null()) {
        text.push(html!("; outcome {}", scalar(o)));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn long_event_details_are_cut_on_char_boundaries() {
        let detail = json!({"message": "é".repeat(500)});
        let text = event_detail(&detail).into_string();
        assert!(text.ends_with('…'));
        assert_eq!(text.chars().count(), "message: ".len() + DETAIL_CHARS + 1);
        assert_eq!(
            event_detail(&json!({"from": 1, "to": 3})).into_string(),
            "1 &rarr; 3 workers"
        );
    }

    #[test]
    fn event_details_read_as_words_not_json() {
        let scaled = json!({"from": 0, "to": 3, "current": 0, "by_type": [],
            "reasons": [{"rule": "queue", "detail": "3 jobs of 4 GPUs need 3 workers", "values": {}}]});
        assert_eq!(
            event_detail(&scaled).into_string(),
            "0 &rarr; 3 workers: <code>queue</code> 3 jobs of 4 GPUs need 3 workers"
        );
        let other = json!({"replica": "r1", "group": "", "source": {"action": "scale_down",
            "workers": ["i-1", "i-2"]}, "calls": 2, "price": -0.0});
        let text = event_detail(&other).into_string();
        assert_eq!(
            text,
            "calls: 2, price: 0, replica: r1, source.action: scale_down, source.workers: i-1 i-2"
        );
        assert!(!text.contains('{') && !text.contains('"'));
        let set = json!({"outcome": "ok", "group": "", "step": {"step": "set_capacity", "spec": {
            "desired": 4, "min": 0, "max": 4, "targets": [
                {"count": 1, "instance_type": "g4dn.12xlarge", "market": "on_demand"},
                {"count": 3, "instance_type": "g5.12xlarge", "market": "spot"}]}}});
        assert_eq!(
            event_detail(&set).into_string(),
            "set capacity to <strong>4</strong> (bounds 0 .. 4): 1 g4dn.12xlarge on_demand, \
             3 g5.12xlarge spot; outcome ok"
        );
        let terminate =
            json!({"step": {"step": "terminate", "workers": ["i-9"], "why": "interrupted"}});
        assert_eq!(
            event_detail(&terminate).into_string(),
            "terminate i-9 (interrupted)"
        );
    }

    #[test]
    fn a_reason_in_a_scaling_event_is_escaped_once() {
        // It used to go through the escaping twice and show `&amp;lt;` for `<`.
        let scaled = json!({"from": 1, "to": 2,
            "reasons": [{"rule": "queue", "detail": "need <3> & more", "values": {}}]});
        assert_eq!(
            event_detail(&scaled).into_string(),
            "1 &rarr; 2 workers: <code>queue</code> need &lt;3&gt; &amp; more"
        );
    }
}
