//! The fleet page for people: `GET /` as one small, self-contained HTML document built from the
//! same [`FleetView`] that `/fleet` serves as JSON. Totals, then per pool its workers, signals,
//! cost and budget, the last decision with its reasons, recent events and an inline SVG chart of
//! desired against current workers. No scripts and no external assets, so it works behind strict
//! content security policies and in text browsers; it reloads itself every 30 seconds.
//!
//! Rendering is a pure function of the view so it can be tested without a server or a store.
//! The page is built as [`Html`]: everything that comes from users or clouds (pool names,
//! instance types, zones, reasons, event details) can only reach it through [`escape`], and
//! the compiler holds to that (see `markup`). The last decision is read back as the
//! [`PoolDecision`] it was stored from.

use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use super::page_events::events_table;
use crate::chart::{
    Axis, Chart, LegendEntry, Panel, Series, Shape, Stroke, Tick, nice_step, nice_ticks,
};
use crate::core::scale::Action;
use crate::fleet::pool_decision::PoolDecision;
use crate::fleet::view::{
    FleetTotals, FleetView, HISTORY_MS, PoolView, WorkerGroup, WorkerSignals,
};
use crate::markup::{Html, escape, html};

/// Seconds between automatic reloads of the page.
const REFRESH_SECONDS: u32 = 30;

/// Change points listed in the text alternative of the chart.
const HISTORY_ROWS: usize = 12;

const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1d232a;--muted:#5b6570;--line:#d5dae0;--bg:#fff;--card:#f6f8fa;\
--bad:#b3261e;--desired:#8a4baf;--current:#1565c0}\
@media (prefers-color-scheme:dark){:root{--fg:#e6e9ec;--muted:#a3acb5;--line:#3a424b;--bg:#15191d;\
--card:#1e2328;--bad:#ff8a80;--desired:#ce93d8;--current:#64b5f6}}\
*{box-sizing:border-box}\
body{margin:0 auto;max-width:72rem;padding:1rem;font:15px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg)}\
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.2rem;margin:0 0 .4rem}h3{font-size:1rem;margin:1rem 0 .3rem}\
a{color:var(--current)}\
.muted{color:var(--muted)}\
dl.kv{display:grid;grid-template-columns:repeat(auto-fill,minmax(10rem,1fr));gap:.4rem 1rem;margin:.6rem 0}\
dl.kv div{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.35rem .6rem}\
dl.kv dt{font-size:.8rem;color:var(--muted)}dl.kv dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums}\
section.pool{border-top:2px solid var(--line);margin-top:1.5rem;padding-top:1rem}\
table{border-collapse:collapse;margin:.3rem 0;font-variant-numeric:tabular-nums}\
caption{text-align:left;font-weight:600;padding:.2rem 0}\
th,td{border-bottom:1px solid var(--line);padding:.2rem .6rem;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right}\
.exceeded,strong.warned{color:var(--bad);font-weight:700}tr.warned td{background:var(--card)}\
code{font-size:.9em}\
svg{width:100%;max-width:48rem;height:auto}\
svg text{fill:var(--muted);font-size:11px;font-family:system-ui,sans-serif}\
svg .grid{stroke:var(--line)}\
svg .desired{stroke:var(--desired)}svg .current{stroke:var(--current)}\
";

/// The whole fleet page.
pub fn render(view: &FleetView) -> String {
    let mut out = Html::with_capacity(16 * 1024);
    out.push_lit("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_lit("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push(html!(
        "<meta http-equiv=\"refresh\" content=\"{}\">\n",
        REFRESH_SECONDS
    ));
    out.push_lit("<title>trainscaler fleet</title>\n<style>");
    out.push_lit(STYLE);
    out.push_lit("</style>\n</head>\n<body>\n<header>\n<h1>trainscaler fleet</h1>\n");
    out.push(html!(
        "<p class=\"muted\">Generated <time datetime=\"{0}\">{0}</time>; reloads every \
         {1}&nbsp;s. Also as <a href=\"/fleet\">JSON (/fleet)</a> and in the \
         <a href=\"/docs\">API docs</a>.</p>\n",
        escape(&view.generated_at),
        REFRESH_SECONDS
    ));
    summary(&mut out, &view.totals);
    out.push_lit("</header>\n<main>\n");

    if view.pools.is_empty() {
        empty_fleet(&mut out);
    } else {
        overview(&mut out, &view.pools);
        for (i, pool) in view.pools.iter().enumerate() {
            pool_section(&mut out, i, pool);
        }
    }
    out.push_lit("</main>\n</body>\n</html>\n");
    out.into_string()
}

/// The fleet at a glance: pools, workers by market, cost, spend against the budgets, and the
/// workers the clouds are taking back.
fn summary(out: &mut Html, t: &FleetTotals) {
    out.push_lit("<dl class=\"kv\" id=\"summary\" aria-label=\"Fleet summary\">\n");
    kv(out, "Pools", html!("{}", t.pools));
    kv(
        out,
        "Workers current / desired",
        html!("{} / {}", t.workers, t.desired),
    );
    kv(
        out,
        "Workers by market",
        html!(
            "{} on-demand &middot; {} spot",
            t.on_demand_workers,
            t.spot_workers
        ),
    );
    kv(out, "Cost per hour", dollars(t.cost_per_hour));
    kv(out, "Spent today (UTC)", dollars(t.spent_today));
    let budgets = match t.daily_budgets {
        None => Html::lit("<span class=\"muted\">no pool has a budget</span>"),
        Some(b) if t.spent_today_budgeted > b => html!(
            "<strong class=\"exceeded\">EXCEEDED</strong>: {} of {}",
            dollars(t.spent_today_budgeted),
            dollars(b)
        ),
        Some(b) => html!("{} of {}", dollars(t.spent_today_budgeted), dollars(b)),
    };
    kv(out, "Spent today against budgets", budgets);
    let warned = if t.warned_workers == 0 {
        Html::lit("none")
    } else {
        html!(
            "<strong class=\"warned\">{}</strong>, {} being replaced",
            t.warned_workers,
            t.replacements
        )
    };
    kv(out, "Workers warned by the cloud", warned);
    out.push_lit("</dl>\n");
}

fn kv(out: &mut Html, label: &'static str, value: Html) {
    out.push(html!(
        "<div><dt>{}</dt><dd>{}</dd></div>\n",
        Html::lit(label),
        value
    ));
}

/// What to do when there is nothing to show yet.
fn empty_fleet(out: &mut Html) {
    out.push_lit(
        "<section aria-labelledby=\"empty\">\n<h2 id=\"empty\">No pools yet</h2>\n\
         <p>A pool is a group of GPU workers that trainscaler sizes from queue depth or GPU \
         utilisation. Create one by sending its policy with <code>PUT /v1/pools/{name}</code>, \
         for example:</p>\n\
         <pre><code>curl -X PUT http://HOST/v1/pools/train \\\n  -H 'content-type: application/json' \\\n  \
         -d '{\"provider\":\"aws\",\"region\":\"us-east-1\",\"instance_types\":[\"g5.xlarge\"],\"max_workers\":4}'</code></pre>\n\
         <p>Every policy field is described in the <a href=\"/docs\">API docs</a>. The fleet as \
         JSON is at <a href=\"/fleet\">/fleet</a>.</p>\n</section>\n",
    );
}

/// One line per pool linking to its section, so a large fleet can be scanned at a glance.
fn overview(out: &mut Html, pools: &[PoolView]) {
    out.push_lit(
        "<table>\n<caption>Pools</caption>\n<thead><tr><th scope=\"col\">Pool</th>\
         <th scope=\"col\" class=\"n\">Current</th><th scope=\"col\" class=\"n\">Desired</th>\
         <th scope=\"col\" class=\"n\">Cost/h</th><th scope=\"col\" class=\"n\">Spent today</th>\
         <th scope=\"col\">Budget</th></tr></thead>\n<tbody>\n",
    );
    for (i, p) in pools.iter().enumerate() {
        out.push(html!(
            "<tr><th scope=\"row\"><a href=\"#pool-{}\">{}</a></th><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
            i,
            escape(&p.name),
            p.current,
            desired_text(p.desired),
            dollars(p.cost_per_hour),
            dollars(p.spent_today),
            budget_text(p),
        ));
    }
    out.push_lit("</tbody>\n</table>\n");
}

fn pool_section(out: &mut Html, index: usize, p: &PoolView) {
    out.push(html!(
        "<section class=\"pool\" id=\"pool-{0}\" aria-labelledby=\"pool-{0}-h\">\n\
         <h2 id=\"pool-{0}-h\">{1}</h2>\n<p class=\"muted\">{2} / {3} &middot; {4} mode</p>\n",
        index,
        escape(&p.name),
        escape(&p.provider),
        escape(&p.region),
        escape(p.mode),
    ));
    out.push_lit("<dl class=\"kv\">\n");
    kv(
        out,
        "Workers current / desired",
        html!("{} / {}", p.current, desired_text(p.desired)),
    );
    kv(
        out,
        "Min .. max",
        html!("{} .. {}", p.min_workers, p.max_workers),
    );
    kv(out, "Queue depth", signal(p.queue_depth));
    kv(out, "Running jobs", signal(p.running_jobs));
    kv(
        out,
        "Mean GPU utilisation",
        p.gpu_utilization.map_or_else(no_signal, percent),
    );
    kv(out, "Cost per hour", dollars(p.cost_per_hour));
    kv(out, "Spent today (UTC)", dollars(p.spent_today));
    kv(out, "Daily budget", budget_text(p));
    out.push_lit("</dl>\n");

    let since = match p.history.first() {
        Some(&(t0, _, _)) if t0 > p.created_at_ms || p.created_at_ms <= 0 => {
            html!("last {} hours", HISTORY_MS / 3_600_000)
        }
        Some(_) => html!(
            "since the pool was created at <time datetime=\"{0}\">{0}</time>",
            escape(&p.created_at)
        ),
        None => html!("last {} hours", HISTORY_MS / 3_600_000),
    };
    out.push(html!(
        "<h3 id=\"pool-{}-chart\">Desired and current, {}</h3>\n",
        index,
        since
    ));
    out.push(chart(index, &p.name, &p.history));

    workers_table(out, &p.workers);
    worker_signals_table(out, &p.worker_signals);
    last_decision(out, p);
    events_table(out, &p.recent_events);
    out.push_lit("</section>\n");
}

fn workers_table(out: &mut Html, workers: &[WorkerGroup]) {
    out.push_lit("<h3>Workers</h3>\n");
    if workers.is_empty() {
        out.push_lit("<p class=\"muted\">No live workers.</p>\n");
        return;
    }
    out.push_lit(
        "<table>\n<thead><tr><th scope=\"col\">Instance type</th><th scope=\"col\">Market</th>\
         <th scope=\"col\">Zone</th><th scope=\"col\" class=\"n\">Count</th></tr></thead>\n<tbody>\n",
    );
    for w in workers {
        out.push(html!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>\n",
            escape(&w.instance_type),
            escape(w.market.as_str()),
            escape(w.zone.as_deref().unwrap_or("any")),
            w.count,
        ));
    }
    out.push_lit("</tbody>\n</table>\n");
}

/// Each live worker: GPU utilisation and memory (and whether memory marks it idle), and its
/// state in words: booting, warned by the cloud, being replaced.
fn worker_signals_table(out: &mut Html, workers: &[WorkerSignals]) {
    if workers.is_empty() {
        return;
    }
    out.push_lit(
        "<h4>Each worker</h4>\n<table>\n<thead><tr><th scope=\"col\">Worker</th>\
         <th scope=\"col\">Instance type</th><th scope=\"col\">Market</th>\
         <th scope=\"col\" class=\"n\">GPU utilisation</th>\
         <th scope=\"col\" class=\"n\">GPU memory used</th><th scope=\"col\">State</th>\
         </tr></thead>\n<tbody>\n",
    );
    for w in workers {
        let memory = w.gpu_memory_used_gib.map_or_else(no_signal, |m| {
            let idle = if w.idle_by_memory { " (idle)" } else { "" };
            html!("{:.1} GiB{}", tidy(m), Html::lit(idle))
        });
        let class = Html::lit(if w.warning.is_some() {
            " class=\"warned\""
        } else {
            ""
        });
        out.push(html!(
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
            class,
            escape(&w.id),
            escape(&w.instance_type),
            escape(w.market.as_str()),
            w.gpu_utilization.map_or_else(no_signal, percent),
            memory,
            worker_state(w),
        ));
    }
    out.push_lit("</tbody>\n</table>\n");
}

/// A worker's state in words (and not in colour alone).
fn worker_state(w: &WorkerSignals) -> Html {
    let mut parts = Vec::new();
    if w.booting {
        parts.push(html!(
            "booting, ready at <time datetime=\"{}\">{}</time>",
            escape(&w.started_at),
            escape(clock(&w.started_at))
        ));
    }
    if let Some(kind) = &w.warning {
        let what = Html::lit(if kind == "interruption_warning" {
            "interruption warning"
        } else {
            "rebalance recommendation"
        });
        let mut text = html!("<strong class=\"warned\">&#9888; {}</strong>", what);
        if let Some(at) = &w.reclaim_at {
            text.push(html!(
                ", reclaimed at <time datetime=\"{}\">{}</time>",
                escape(at),
                escape(clock(at))
            ));
        }
        parts.push(text);
        match &w.replacement {
            Some(r) => parts.push(html!(
                "<strong>replacement under way</strong>: {} {}",
                r.get("instance_type").map(scalar).unwrap_or_default(),
                r.get("market").map(scalar).unwrap_or_default()
            )),
            None => parts.push(Html::lit("no replacement yet")),
        }
    }
    if parts.is_empty() {
        Html::lit("running")
    } else {
        Html::join(parts, "; ")
    }
}

/// `HH:MM:SS` of an RFC 3339 time (the date is the page's own), or the text as it is.
fn clock(rfc3339: &str) -> &str {
    rfc3339.get(11..19).unwrap_or(rfc3339)
}

/// The last decision, read as the [`PoolDecision`] it was stored from. One that does not read
/// as one (a field renamed or gone since it was stored) says so on the page and in the log
/// instead of showing up as blanks.
fn last_decision(out: &mut Html, p: &PoolView) {
    out.push_lit("<h3>Last decision</h3>\n");
    let Some(stored) = p.last_decision.as_ref().filter(|d| !d.is_null()) else {
        out.push_lit("<p class=\"muted\">No decision yet.</p>\n");
        return;
    };
    let d = match PoolDecision::deserialize(stored) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(pool = %p.name, error = %e, "the stored last decision could not be read");
            out.push(html!(
                "<p><strong class=\"warned\">The stored decision could not be read</strong>: {}.</p>\n",
                escape(&e)
            ));
            return;
        }
    };
    let w = &d.decision;
    let mut facts = vec![html!(
        "at <time datetime=\"{0}\">{0}</time>",
        escape(&d.decided_at)
    )];
    for (label, value) in [
        ("desired", w.desired),
        ("previously", w.previous_desired),
        ("current", w.current),
        ("need", w.need),
    ] {
        facts.push(html!("{} <strong>{}</strong>", Html::lit(label), value));
    }
    facts.push(Html::lit(if d.changed {
        "changed the target"
    } else {
        "target unchanged"
    }));
    if let Some(until) = &w.cooldown_until {
        facts.push(html!("cooldown until {}", escape(until)));
    }
    facts.push(html!("next evaluation {}", escape(&w.next_evaluation_at)));
    out.push(html!("<p>{}.</p>\n", Html::join(facts, ", ")));

    if w.reasons.is_empty() {
        out.push_lit("<p class=\"muted\">No rule fired.</p>\n");
    } else {
        out.push_lit("<p>Reasons:</p>\n<ul>\n");
        for r in &w.reasons {
            out.push(html!(
                "<li><code>{}</code>: {}</li>\n",
                escape(r.rule.as_str()),
                escape(&r.detail)
            ));
        }
        out.push_lit("</ul>\n");
    }

    if !w.actions.is_empty() {
        out.push_lit("<p>Actions:</p>\n<ul>\n");
        for a in &w.actions {
            out.push(html!("<li>{}</li>\n", action_text(a)));
        }
        out.push_lit("</ul>\n");
    }
}

/// `scale_up: count 2, instance_type g5.xlarge, market spot`: the action's fields as the API
/// writes them, by name and in name order, so a new field or kind shows up without changes
/// here. Empty lists and absent values are left out.
fn action_text(a: &Action) -> Html {
    let fields = match serde_json::to_value(a) {
        Ok(Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    };
    let kind = fields
        .get("action")
        .map(scalar)
        .unwrap_or_else(|| Html::lit("action"));
    let listed: Vec<Html> = fields
        .iter()
        .filter(|(k, v)| k.as_str() != "action" && !v.is_null())
        .filter(|(_, v)| v.as_array().is_none_or(|a| !a.is_empty()))
        .map(|(k, v)| html!("{} {}", escape(k), scalar(v)))
        .collect();
    if listed.is_empty() {
        html!("<code>{}</code>", kind)
    } else {
        html!("<code>{}</code>: {}", kind, Html::join(listed, ", "))
    }
}

/// A JSON value as escaped text: strings without quotes, arrays joined, objects as JSON.
pub(super) fn scalar(v: &Value) -> Html {
    match v {
        Value::String(s) => escape(s).html(),
        Value::Array(items) => Html::join(items.iter().map(scalar), " "),
        Value::Null => Html::default(),
        other => escape(other).html(),
    }
}

/// `x`, or 0 when it would print as zero with a sign (`-0.00` reads like a refund).
pub(super) fn tidy(x: f64) -> f64 {
    if x.abs() < 0.005 { 0.0 } else { x }
}

fn dollars(x: f64) -> Html {
    html!("${:.2}", tidy(x))
}

fn percent(fraction: f64) -> Html {
    html!("{:.0}%", tidy(fraction * 100.0))
}

fn desired_text(desired: Option<u32>) -> Html {
    desired.map_or_else(|| Html::lit("none yet"), |d| html!("{}", d))
}

fn no_signal() -> Html {
    Html::lit("<span class=\"muted\">no signal</span>")
}

fn signal(v: Option<f64>) -> Html {
    match v {
        // Counts arrive as floats; show whole numbers without a trailing `.0`.
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => html!("{:.0}", tidy(x)),
        Some(x) => html!("{:.1}", tidy(x)),
        None => no_signal(),
    }
}

/// Spend against the daily budget; an exceeded budget is marked in words as well as in colour.
fn budget_text(p: &PoolView) -> Html {
    match &p.budget {
        None => Html::lit("<span class=\"muted\">none</span>"),
        Some(b) if b.exceeded => html!(
            "<strong class=\"exceeded\">EXCEEDED</strong>: {} of {}",
            dollars(b.spent_today),
            dollars(b.daily_budget)
        ),
        Some(b) => html!("{} of {}", dollars(b.spent_today), dollars(b.daily_budget)),
    }
}

// ---- chart -------------------------------------------------------------------------------

const CHART_WIDTH: u32 = 720;
const CHART_HEIGHT: u32 = 230;

const HH_MM: &[BorrowedFormatItem<'static>] = format_description!("[hour]:[minute]");

/// `HH:MM` in UTC for epoch milliseconds.
fn hh_mm(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(HH_MM).ok())
        .unwrap_or_default()
}

/// Tick spacing giving at most six intervals over the span.
fn time_step(span_ms: i64) -> i64 {
    const MINUTE: i64 = 60_000;
    [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440]
        .iter()
        .map(|m| m * MINUTE)
        .find(|step| span_ms / step <= 6)
        .unwrap_or_else(|| (span_ms / 6).max(1))
}

/// Ticks on round UTC minutes or hours from `t0` to `t1`, in milliseconds since `t0`.
fn time_ticks(t0: i64, t1: i64) -> Vec<Tick> {
    let step = time_step(t1.saturating_sub(t0).max(1));
    let mut t = t0.div_euclid(step) * step;
    if t < t0 {
        t += step;
    }
    let mut ticks = Vec::new();
    while t <= t1 {
        ticks.push(Tick {
            at: t.saturating_sub(t0) as f64,
            label: hh_mm(t),
        });
        match t.checked_add(step) {
            Some(next) => t = next,
            None => break,
        }
    }
    ticks
}

const DESIRED: Stroke = Stroke {
    colour: "#8a4baf",
    width: 2.0,
    dash: Some("6 4"),
    class: Some("desired"),
};
const CURRENT: Stroke = Stroke {
    colour: "#1565c0",
    width: 2.0,
    dash: None,
    class: Some("current"),
};

/// Desired (dashed) and current (solid) workers as an inline SVG step chart, with a text
/// summary in `<title>`/`<desc>` and a short table of the latest changes for text browsers.
fn chart(index: usize, pool: &str, history: &[(i64, u32, u32)]) -> Html {
    let (Some(first), Some(last)) = (history.first(), history.last()) else {
        return Html::lit("<p class=\"muted\">No history for this window.</p>\n");
    };
    // One point says what holds now and nothing about before: a line of one instant, on an
    // axis of one minute, rather than a history made up.
    let widened;
    let series: &[(i64, u32, u32)] = if history.len() == 1 {
        widened = [*first, *first];
        &widened
    } else {
        history
    };
    let t0 = series[0].0;
    let t1 = last.0.max(t0.saturating_add(60_000));
    let max_value = series.iter().map(|&(_, d, c)| d.max(c)).max().unwrap_or(0);
    // An all-zero history still gets a 0..1 axis rather than a division by zero.
    let top = f64::from(max_value.max(1));
    let y_step = nice_step(top, 4, true);
    let y_top = (top / y_step).ceil() * y_step;
    let line = |value: fn(&(i64, u32, u32)) -> u32, stroke| Series {
        points: series
            .iter()
            .map(|h| (h.0.saturating_sub(t0) as f64, f64::from(value(h))))
            .collect(),
        shape: Shape::Step,
        stroke,
    };
    let svg = Chart {
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        font_size: 11.0,
        title: format!("Desired and current workers of pool {pool}"),
        show_title: false,
        description: Some(format!(
            "From {} to {} UTC. Now desired {}, current {}; at most {} in this window.",
            hh_mm(t0),
            hh_mm(t1),
            last.1,
            last.2,
            max_value
        )),
        id: Some(format!("chart-{index}")),
        background: None,
        legend: vec![
            LegendEntry {
                label: "desired".to_owned(),
                stroke: DESIRED,
            },
            LegendEntry {
                label: "current".to_owned(),
                stroke: CURRENT,
            },
        ],
        x: Axis {
            lo: 0.0,
            hi: t1.saturating_sub(t0) as f64,
            ticks: time_ticks(t0, t1),
            label: "time (UTC)".to_owned(),
        },
        panels: vec![Panel {
            y: Axis {
                lo: 0.0,
                hi: y_top,
                ticks: nice_ticks(0.0, y_top, 4, true)
                    .into_iter()
                    .map(|v| Tick {
                        at: v,
                        label: format!("{v}"),
                    })
                    .collect(),
                label: "workers".to_owned(),
            },
            // Current first so the dashed desired line stays visible where the two coincide.
            series: vec![line(|h| h.2, CURRENT), line(|h| h.1, DESIRED)],
        }],
    }
    .render();
    let mut out = svg;
    out.push(history_table(index, history));
    out
}

/// The latest changes as a table, folded away by default: the chart's text alternative.
fn history_table(index: usize, history: &[(i64, u32, u32)]) -> Html {
    let mut changes: Vec<&(i64, u32, u32)> = Vec::new();
    for h in history {
        if changes.last().is_none_or(|p| (p.1, p.2) != (h.1, h.2)) {
            changes.push(h);
        }
    }
    let shown = &changes[changes.len().saturating_sub(HISTORY_ROWS)..];
    let mut out = html!(
        "<details><summary>Latest changes as a table</summary>\n<table aria-describedby=\"pool-{}-chart\">\n\
         <thead><tr><th scope=\"col\">Since (UTC)</th><th scope=\"col\" class=\"n\">Desired</th>\
         <th scope=\"col\" class=\"n\">Current</th></tr></thead>\n<tbody>\n",
        index
    );
    for (t, d, c) in shown {
        out.push(html!(
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
            escape(hh_mm(*t)),
            u64::from(*d),
            u64::from(*c)
        ));
    }
    out.push_lit("</tbody>\n</table>\n</details>\n");
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::chart::svg_doc::SvgDoc;
    use crate::core::catalog::Market;
    use crate::core::scale::{Reason, Rule, WorkersDecision};
    use crate::fleet::view::{BudgetView, EventOut, FleetTotals};

    /// 2026-01-21T12:00:00Z.
    const NOW: i64 = 1_768_996_800_000;

    fn pool(name: &str) -> PoolView {
        PoolView {
            name: name.to_owned(),
            created_at: "2026-01-20T00:00:00Z".to_owned(),
            created_at_ms: NOW - 36 * 3_600_000,
            provider: "aws".to_owned(),
            region: "us-east-1".to_owned(),
            mode: "queue",
            current: 2,
            desired: Some(3),
            min_workers: 0,
            max_workers: 8,
            workers: vec![WorkerGroup {
                instance_type: "g5.xlarge".to_owned(),
                market: Market::Spot,
                zone: Some("us-east-1a".to_owned()),
                count: 2,
            }],
            queue_depth: Some(4.0),
            running_jobs: Some(2.0),
            gpu_utilization: Some(0.734),
            worker_signals: vec![WorkerSignals {
                id: "i-0<b>".to_owned(),
                instance_type: "g5.xlarge".to_owned(),
                market: Market::Spot,
                zone: Some("us-east-1a".to_owned()),
                started_at: "2026-01-21T10:00:00Z".to_owned(),
                booting: false,
                warning: None,
                reclaim_at: None,
                replacement: None,
                gpu_utilization: Some(0.05),
                gpu_memory_used_gib: Some(0.7),
                idle_by_memory: true,
            }],
            cost_per_hour: 2.01,
            spent_today: 12.5,
            budget: None,
            last_decision: None,
            last_decision_at: None,
            recent_events: Vec::new(),
            history: Vec::new(),
        }
    }

    fn fleet(pools: Vec<PoolView>) -> FleetView {
        FleetView {
            generated_at: "2026-01-21T12:00:00Z".to_owned(),
            totals: FleetTotals {
                pools: u32::try_from(pools.len()).unwrap_or(u32::MAX),
                workers: pools.iter().map(|p| p.current).sum(),
                on_demand_workers: 0,
                spot_workers: pools.iter().map(|p| p.current).sum(),
                desired: pools.iter().map(|p| p.desired.unwrap_or(p.current)).sum(),
                cost_per_hour: pools.iter().map(|p| p.cost_per_hour).sum(),
                spent_today: pools.iter().map(|p| p.spent_today).sum(),
                daily_budgets: None,
                spent_today_budgeted: 0.0,
                warned_workers: 0,
                replacements: 0,
            },
            pools,
        }
    }

    /// A last decision as the store keeps it: the serialised [`PoolDecision`].
    fn stored_decision(reasons: Vec<Reason>, actions: Vec<Action>) -> Value {
        serde_json::to_value(PoolDecision {
            pool: "p".to_owned(),
            decided_at: "2026-01-21T11:59:00Z".to_owned(),
            changed: true,
            decision: WorkersDecision {
                current: 2,
                desired: 3,
                previous_desired: 2,
                need: 3,
                by_type: Vec::new(),
                usable_types: vec!["g5.xlarge".to_owned()],
                delta: 1,
                actions,
                reasons,
                cooldown_until: None,
                next_evaluation_at: "2026-01-21T12:01:00Z".to_owned(),
                cooldown_until_ms: None,
                next_evaluation_at_ms: NOW + 60_000,
                cost_per_hour: 2.01,
                budget: None,
            },
            queue_depth: Some(4.0),
            running_jobs: Some(2.0),
            catalog_version: 1,
        })
        .expect("a decision serialises")
    }

    fn scale_up(instance_type: &str) -> Action {
        Action::ScaleUp {
            instance_type: instance_type.to_owned(),
            market: Market::Spot,
            count: 1,
            zones: Vec::new(),
            avoid_zones: Vec::new(),
        }
    }

    /// The chart of the first pool on the page, parsed as XML.
    fn chart_of(html: &str) -> SvgDoc {
        SvgDoc::parse(html)
    }

    #[test]
    fn user_strings_never_appear_raw() {
        let mut p = pool("<script>alert(1)</script>");
        p.workers[0].instance_type = "<img src=x onerror=y>".to_owned();
        p.last_decision = Some(stored_decision(
            vec![Reason {
                rule: Rule::Queue,
                detail: "queue \"4\" > 2 & rising".to_owned(),
                values: BTreeMap::new(),
            }],
            vec![scale_up("<i>t</i>")],
        ));
        p.recent_events = vec![EventOut {
            id: 1,
            at: "2026-01-21T11:00:00Z".to_owned(),
            kind: "capacity_error".to_owned(),
            worker: Some("<w>".to_owned()),
            instance_type: Some("<it>".to_owned()),
            zone: None,
            detail: json!({"message": "</td><script>"}),
        }];
        p.history = vec![(NOW - HISTORY_MS, 1, 1), (NOW, 1, 1)];
        let html = render(&fleet(vec![p]));
        for raw in [
            "<script>",
            "<img",
            "<i>t",
            "<w>",
            "<it>",
            "</td><script",
            "\"4\" >",
        ] {
            assert!(!html.contains(raw), "{raw} appears unescaped");
        }
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("queue &quot;4&quot; &gt; 2 &amp; rising"));
        assert!(html.contains("instance_type &lt;i&gt;t&lt;/i&gt;"));
        assert!(html.contains("<td>message: &lt;/td&gt;&lt;script&gt;</td>"));
        // The name is escaped inside the SVG title too, and reads back as it was.
        assert!(html.contains("workers of pool &lt;script&gt;"));
        let title = chart_of(&html)
            .named("title")
            .next()
            .expect("a title")
            .text
            .clone();
        assert_eq!(
            title,
            "Desired and current workers of pool <script>alert(1)</script>"
        );
    }

    #[test]
    fn one_step_line_per_series_with_two_points_per_change() {
        let mut p = pool("train");
        p.history = vec![
            (NOW - HISTORY_MS, 0, 0),
            (NOW - 4 * 3_600_000, 4, 0),
            (NOW - 3 * 3_600_000, 4, 2),
            (NOW - 3_600_000, 4, 4),
            (NOW, 4, 4),
        ];
        let doc = chart_of(&render(&fleet(vec![p])));
        let lines = doc.series();
        // Current under desired, each a step line: two vertices a change, one at the start.
        let classes: Vec<&str> = lines.iter().map(|l| l.attr("class")).collect();
        assert_eq!(classes, vec!["current", "desired"]);
        for l in &lines {
            assert_eq!(l.points().len(), 2 * 5 - 1, "{l:?}");
        }
        assert_eq!(lines[1].attr("stroke-dasharray"), "6 4");
        assert_eq!(lines[0].attr("stroke-dasharray"), "");
        // Desired starts at 0 at the left edge and ends at 4, the top of a 0..4 axis, at the
        // right edge; current ends there too.
        let desired = lines[1].points();
        let current = lines[0].points();
        let (first, last) = (desired[0], desired[desired.len() - 1]);
        assert!(first.0 < last.0 && first.1 > last.1, "{desired:?}");
        assert_eq!(current[current.len() - 1], last);
        assert_eq!(current[0], first);
        // The y ticks stop at 4; hourly time ticks from 06:00 to 12:00 UTC.
        for label in [
            "0",
            "4",
            "06:00",
            "07:00",
            "09:00",
            "12:00",
            "time (UTC)",
            "workers",
        ] {
            assert!(doc.has_text(label), "{label}: {:?}", doc.texts());
        }
        assert!(!doc.has_text("5"));
        // The legend names both lines, in their styles.
        assert!(doc.has_text("desired") && doc.has_text("current"));
        let title = doc.named("title").next().expect("a title");
        assert_eq!(title.attr("id"), "chart-0-title");
        assert_eq!(title.text, "Desired and current workers of pool train");
        let desc = &doc.named("desc").next().expect("a description").text;
        assert!(
            desc.contains("From 06:00 to 12:00 UTC. Now desired 4, current 4"),
            "{desc}"
        );
        assert_eq!(
            doc.elements[0].attr("aria-labelledby"),
            "chart-0-title chart-0-desc"
        );
    }

    #[test]
    fn degenerate_histories_still_render() {
        let mut empty = pool("empty");
        empty.history = Vec::new();
        let html = render(&fleet(vec![empty]));
        assert!(html.contains("No history for this window."));
        assert!(!html.contains("<svg"));
        let mut single = pool("single");
        single.history = vec![(NOW, 2, 1)];
        let mut zeros = pool("zeros");
        zeros.history = vec![(NOW - HISTORY_MS, 0, 0), (NOW, 0, 0)];
        for p in [single, zeros] {
            let html = render(&fleet(vec![p]));
            let doc = chart_of(&html);
            let lines = doc.series();
            assert_eq!(lines.len(), 2);
            for l in lines {
                // Two samples (one point is widened to an instant of one minute): 3 vertices.
                assert_eq!(l.points().len(), 3);
                assert!(
                    l.points()
                        .iter()
                        .all(|(x, y)| x.is_finite() && y.is_finite())
                );
            }
        }
    }

    #[test]
    fn empty_fleet_explains_how_to_start() {
        let html = render(&fleet(Vec::new()));
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("No pools yet"));
        assert!(html.contains("PUT /v1/pools/{name}"));
        assert!(html.contains("href=\"/docs\""));
        assert!(html.contains("href=\"/fleet\""));
        assert!(!html.contains("<svg"));
    }

    #[test]
    fn exceeded_budget_is_marked() {
        let mut over = pool("over");
        over.budget = Some(BudgetView {
            daily_budget: 10.0,
            spent_today: 12.5,
            exceeded: true,
        });
        let mut under = pool("under");
        under.budget = Some(BudgetView {
            daily_budget: 100.0,
            spent_today: 12.5,
            exceeded: false,
        });
        let html = render(&fleet(vec![under.clone()]));
        assert!(!html.contains("class=\"exceeded\""));
        let html = render(&fleet(vec![over, under]));
        // Once in the overview and once in the pool's section.
        assert_eq!(html.matches("class=\"exceeded\">EXCEEDED").count(), 2);
        assert!(html.contains("$12.50 of $10.00"));
    }

    #[test]
    fn a_stored_decision_that_does_not_read_says_so() {
        let mut p = pool("p");
        let mut renamed = stored_decision(Vec::new(), Vec::new());
        let fields = renamed.as_object_mut().expect("an object");
        let desired = fields.remove("desired").expect("has desired");
        fields.insert("target".to_owned(), desired);
        p.last_decision = Some(renamed);
        let html = render(&fleet(vec![p.clone()]));
        assert!(
            html.contains(
                "<strong class=\"warned\">The stored decision could not be read</strong>: \
                 missing field `desired`."
            ),
            "{html}"
        );
        assert!(!html.contains("desired <strong>"));
        assert!(!html.contains("No rule fired."));

        p.last_decision = Some(json!("not an object"));
        assert!(render(&fleet(vec![p.clone()])).contains("could not be read"));
        // A rule the core does not know is unreadable too, not shown as if it were one.
        let mut unknown = stored_decision(Vec::new(), Vec::new());
        unknown["reasons"] = json!([{"rule": "<b>made_up</b>", "detail": "", "values": {}}]);
        p.last_decision = Some(unknown);
        let html = render(&fleet(vec![p.clone()]));
        assert!(html.contains("could not be read</strong>: unknown variant `&lt;b&gt;made_up"));
        p.last_decision = Some(Value::Null);
        assert!(render(&fleet(vec![p])).contains("No decision yet."));
    }

    #[test]
    fn full_decision_and_signals() {
        let mut p = pool("p");
        p.last_decision_at = Some("2026-01-21T11:59:00Z".to_owned());
        p.last_decision = Some(stored_decision(
            vec![Reason {
                rule: Rule::Queue,
                detail: "4 jobs waiting".to_owned(),
                values: BTreeMap::from([("queue", 4.0)]),
            }],
            vec![scale_up("g5.xlarge")],
        ));
        let html = render(&fleet(vec![p]));
        assert!(html.contains("<code>queue</code>: 4 jobs waiting"));
        assert!(
            html.contains("<code>scale_up</code>: count 1, instance_type g5.xlarge, market spot")
        );
        assert!(html.contains(
            "<p>at <time datetime=\"2026-01-21T11:59:00Z\">2026-01-21T11:59:00Z</time>, \
             desired <strong>3</strong>, previously <strong>2</strong>, current <strong>2</strong>, \
             need <strong>3</strong>, changed the target, next evaluation 2026-01-21T12:01:00Z.</p>"
        ));
        assert!(html.contains("73%"));
        assert!(html.contains("<td>g5.xlarge</td><td>spot</td><td>us-east-1a</td>"));
        assert!(html.contains(
            "<td>i-0&lt;b&gt;</td><td>g5.xlarge</td><td>spot</td><td class=\"n\">5%</td>\
             <td class=\"n\">0.7 GiB (idle)</td><td>running</td>"
        ));
    }

    #[test]
    fn warned_workers_and_their_replacements_are_marked_in_words() {
        let mut p = pool("spot");
        let w = &mut p.worker_signals[0];
        w.warning = Some("interruption_warning".to_owned());
        w.reclaim_at = Some("2026-01-21T12:02:00Z".to_owned());
        w.replacement = Some(json!({"instance_type": "g5.2xlarge", "market": "on_demand"}));
        let mut booting = w.clone();
        booting.id = "i-new".to_owned();
        booting.warning = None;
        booting.replacement = None;
        booting.booting = true;
        booting.started_at = "2026-01-21T12:00:30Z".to_owned();
        p.worker_signals.push(booting);
        let mut view = fleet(vec![p]);
        view.totals.warned_workers = 1;
        view.totals.replacements = 1;
        let html = render(&view);
        assert!(
            html.contains("<tr class=\"warned\"><td>i-0&lt;b&gt;</td>"),
            "{html}"
        );
        assert!(html.contains(
            "&#9888; interruption warning</strong>, reclaimed at \
             <time datetime=\"2026-01-21T12:02:00Z\">12:02:00</time>; \
             <strong>replacement under way</strong>: g5.2xlarge on_demand"
        ));
        assert!(
            html.contains(
                "booting, ready at <time datetime=\"2026-01-21T12:00:30Z\">12:00:30</time>"
            )
        );
        assert!(html.contains("<strong class=\"warned\">1</strong>, 1 being replaced"));
    }

    #[test]
    fn the_summary_counts_markets_and_spend_against_budgets() {
        let mut view = fleet(vec![pool("a")]);
        view.totals.on_demand_workers = 1;
        view.totals.spot_workers = 2;
        view.totals.daily_budgets = Some(50.0);
        view.totals.spent_today_budgeted = 12.5;
        let html = render(&view);
        assert!(html.contains("1 on-demand &middot; 2 spot"));
        assert!(html.contains("<dt>Spent today against budgets</dt><dd>$12.50 of $50.00</dd>"));
        view.totals.daily_budgets = None;
        assert!(render(&view).contains("no pool has a budget"));
    }

    #[test]
    fn history_starts_when_the_pool_was_created() {
        let mut p = pool("young");
        p.created_at = "2026-01-21T11:30:00Z".to_owned();
        p.created_at_ms = NOW - 30 * 60_000;
        p.history = vec![
            (NOW - 30 * 60_000, 0, 0),
            (NOW - 20 * 60_000, 2, 2),
            (NOW, 2, 2),
        ];
        let html = render(&fleet(vec![p]));
        assert!(html.contains("since the pool was created at"), "{html}");
        // The axis runs from 11:30 to 12:00, five-minute ticks; nothing from six hours ago.
        assert!(html.contains(">11:30</text>") && html.contains(">12:00</text>"));
        assert!(!html.contains(">06:00</text>") && !html.contains(">11:25</text>"));
    }

    #[test]
    fn negative_zero_never_shows() {
        let mut p = pool("z");
        p.cost_per_hour = -0.0;
        p.spent_today = -0.001;
        p.gpu_utilization = Some(-0.0);
        p.queue_depth = Some(-0.0);
        let html = render(&fleet(vec![p]));
        for signed in ["$-", "-0%", ">-0<", "-0.0"] {
            assert!(!html.contains(signed), "{signed}: a negative zero is shown");
        }
        assert!(html.contains("$0.00"));
    }

    #[test]
    fn time_steps_are_round() {
        assert_eq!(time_step(HISTORY_MS), 3_600_000);
        assert_eq!(time_step(30 * 60_000), 5 * 60_000);
    }
}
