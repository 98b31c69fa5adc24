//! The two text formats `/metrics` speaks: OpenMetrics 1.0 (what `prometheus-client`
//! encodes, and the default) and the classic Prometheus text format 0.0.4, for scrapers
//! that ask for `text/plain` (Prometheus configured with `scrape_protocols:
//! [PrometheusText0.0.4]`, older agents, `promtool check metrics`).
//!
//! The classic format is derived from the OpenMetrics text rather than encoded twice: the
//! two differ, for the families this service exports, only in a counter's family name
//! (`x` in OpenMetrics, `x_total` in the classic format, matching its samples), the `# UNIT`
//! lines and the closing `# EOF`, none of which the classic parser accepts.

use axum::http::HeaderMap;
use axum::http::header::ACCEPT;

pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Which format a scraper asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Classic,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Classic => CLASSIC,
        }
    }
}

/// The format the `Accept` header prefers: the media range of highest `q` among
/// `application/openmetrics-text` and `text/plain` (a tie or a wildcard goes to OpenMetrics;
/// no header, or one naming neither, too). Prometheus itself sends both with OpenMetrics
/// preferred unless told otherwise.
pub fn negotiate(headers: &HeaderMap) -> Format {
    let mut best: Option<(f32, Format)> = None;
    for value in headers.get_all(ACCEPT) {
        let Ok(text) = value.to_str() else { continue };
        for range in text.split(',') {
            let Ok(mime) = range.trim().parse::<mime::Mime>() else {
                continue;
            };
            let q = mime
                .get_param("q")
                .and_then(|q| q.as_str().parse::<f32>().ok())
                .unwrap_or(1.0);
            if q <= 0.0 {
                continue;
            }
            let format = match (mime.type_().as_str(), mime.subtype().as_str()) {
                ("application", "openmetrics-text") | ("*", "*") | ("application", "*") => {
                    Format::OpenMetrics
                }
                ("text", "plain") | ("text", "*") => Format::Classic,
                _ => continue,
            };
            let better = match best {
                None => true,
                Some((bq, bf)) => q > bq || (q == bq && bf == Format::Classic),
            };
            if better {
                best = Some((q, format));
            }
        }
    }
    best.map_or(Format::OpenMetrics, |(_, f)| f)
}

/// The classic Prometheus text of an OpenMetrics exposition.
pub fn to_classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, "counter")) = rest.rsplit_once(' ')
        {
            // The HELP line came just before, under the OpenMetrics family name.
            rename_last_help(&mut out, name);
            out.push_str(&format!("# TYPE {name}_total counter\n"));
            continue;
        }
        // A counter's `_created` samples have no place in the classic format.
        if is_created_sample(line) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn rename_last_help(out: &mut String, name: &str) {
    let help = format!("# HELP {name} ");
    let Some(start) = out.rfind(&help) else {
        return;
    };
    if out[..start].ends_with('\n') || start == 0 {
        out.insert_str(start + help.len() - 1, "_total");
    }
}

fn is_created_sample(line: &str) -> bool {
    if line.starts_with('#') {
        return false;
    }
    let name = line.split(['{', ' ']).next().unwrap_or("");
    name.ends_with("_created")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_scraper_gets_the_format_it_prefers() {
        assert_eq!(negotiate(&HeaderMap::new()), Format::OpenMetrics);
        assert_eq!(negotiate(&accept("*/*")), Format::OpenMetrics);
        assert_eq!(
            negotiate(&accept("text/plain;version=0.0.4")),
            Format::Classic
        );
        // Prometheus 2.x/3.x default scrape header: OpenMetrics first.
        assert_eq!(
            negotiate(&accept(
                "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
            )),
            Format::OpenMetrics
        );
        // Told to scrape the classic format only.
        assert_eq!(
            negotiate(&accept("text/plain;version=0.0.4;q=0.9,*/*;q=0.1")),
            Format::Classic
        );
        assert_eq!(negotiate(&accept("text/html")), Format::OpenMetrics);
        assert_eq!(negotiate(&accept("text/plain;q=0")), Format::OpenMetrics);
    }

    #[test]
    fn counters_are_renamed_and_openmetrics_only_lines_dropped() {
        let om = "# HELP trainscaler_decisions Decisions made.\n\
                  # TYPE trainscaler_decisions counter\n\
                  trainscaler_decisions_total{kind=\"pool\"} 3\n\
                  trainscaler_decisions_created{kind=\"pool\"} 1700000000.0\n\
                  # HELP trainscaler_pool_queue_depth Jobs waiting.\n\
                  # TYPE trainscaler_pool_queue_depth gauge\n\
                  # UNIT trainscaler_pool_queue_depth jobs\n\
                  trainscaler_pool_queue_depth{pool=\"a\"} 2.0\n\
                  # EOF\n";
        assert_eq!(
            to_classic(om),
            "# HELP trainscaler_decisions_total Decisions made.\n\
             # TYPE trainscaler_decisions_total counter\n\
             trainscaler_decisions_total{kind=\"pool\"} 3\n\
             # HELP trainscaler_pool_queue_depth Jobs waiting.\n\
             # TYPE trainscaler_pool_queue_depth gauge\n\
             trainscaler_pool_queue_depth{pool=\"a\"} 2.0\n"
        );
    }
}
