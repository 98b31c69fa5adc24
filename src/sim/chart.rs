//! The picture of a `simulate` run: policies' timelines as one SVG, so a person can see at a
//! glance where a policy ran more workers, let the queue grow or spent faster.
//!
//! Three panels share one time axis (workers, jobs queued, cumulative dollars), one line per
//! policy in the same colour in every panel, with the legend in a strip of its own above them
//! so it never hides a line. This file decides what to draw; [`crate::chart`], the renderer
//! the fleet page uses too, draws it.
//!
//! Two things keep it readable whatever the policies do. When some policies cost many times
//! what the others do (a fixed on-demand fleet beside autoscaled ones), the costly ones get
//! a cost panel of their own, so the others' lines are not flattened against the axis. And
//! lines are drawn widest first, each narrower than the one before, so two policies that did
//! exactly the same show as a line inside a wider one rather than one hiding the other.

use crate::chart::{Axis, Chart, LegendEntry, Panel, Series, Shape, Stroke, Tick, nice_ticks};
use crate::core::sim::report::Timeline;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// No policy had a single point to draw.
    #[error("nothing to chart: no policy has a timeline point")]
    NoData,
    /// A timeline whose columns disagree: the points can't be paired up.
    #[error(
        "timeline of policy {policy:?} has {at} times but {workers} worker, {queued} queue and {cost} cost values"
    )]
    Ragged {
        policy: String,
        at: usize,
        workers: usize,
        queued: usize,
        cost: usize,
    },
    /// The canvas can't hold the title, the legend and three readable panels, or a side is
    /// over [`MAX_SIDE`].
    #[error(
        "a {width}x{height} chart with {policies} policies needs at least {min_width}x{min_height} and at most {MAX_SIDE}x{MAX_SIDE} pixels"
    )]
    BadSize {
        width: u32,
        height: u32,
        policies: usize,
        min_width: u32,
        min_height: u32,
    },
}

/// Values are cut to this, so that a range's width (twice it) stays finite.
const LARGEST_Y: f64 = 1e300;

/// The largest side accepted: no screen needs more, and it bounds what a request can ask for.
pub const MAX_SIDE: u32 = 10_000;

const MIN_WIDTH: u32 = 320;
/// Below this a panel's plotting area has no room for its tick labels.
const MIN_PLOT_HEIGHT: f64 = 70.0;

const FONT_SIZE: f64 = 15.0;

/// Okabe–Ito's colour-blind-safe set, black left out since axes are black. Past seven policies
/// the colours repeat; the legend order still tells them apart.
const COLOURS: [&str; 7] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442",
];

/// A cost panel of its own for the policies above a gap of at least this ratio between one
/// policy's final cost and the next cheaper one's.
const SPLIT_RATIO: f64 = 5.0;
/// The narrowest line (the last policy's); each earlier policy's is this much wider.
const LINE_WIDTH: u32 = 2;
const LINE_WIDTH_STEP: u32 = 2;
/// The widest line, however many policies.
const MAX_LINE_WIDTH: u32 = 10;

const HOUR_MS: f64 = 3_600_000.0;
const DAY_MS: f64 = 24.0 * HOUR_MS;

/// Draws `runs` (policy name, timeline) as an SVG document of `width` x `height` pixels.
///
/// The time axis counts from the earliest point of any run, in days when the runs span at
/// least two days and in hours otherwise. A run with no points still gets its legend entry
/// and colour, so colours don't shift between charts of the same policies; it is an error
/// only when no run has a point.
pub fn render_svg(
    runs: &[(&str, &Timeline)],
    width: u32,
    height: u32,
) -> Result<String, ChartError> {
    for (name, t) in runs {
        let n = t.at_ms.len();
        if t.workers.len() != n || t.queued.len() != n || t.cost.len() != n {
            return Err(ChartError::Ragged {
                policy: (*name).to_string(),
                at: n,
                workers: t.workers.len(),
                queued: t.queued.len(),
                cost: t.cost.len(),
            });
        }
    }
    let (Some(first), Some(last)) = (
        runs.iter().filter_map(|(_, t)| t.at_ms.iter().min()).min(),
        runs.iter().filter_map(|(_, t)| t.at_ms.iter().max()).max(),
    ) else {
        return Err(ChartError::NoData);
    };
    let bad_size = |min_height: u32| ChartError::BadSize {
        width,
        height,
        policies: runs.len(),
        min_width: MIN_WIDTH,
        min_height,
    };
    if !(MIN_WIDTH..=MAX_SIDE).contains(&width) || height > MAX_SIDE {
        return Err(bad_size(0));
    }
    let (mut chart, integral) = describe(runs, &TimeAxis::new(*first, *last), width, height);
    let panels = chart.panels.len() as f64;
    if chart.plot_height() < MIN_PLOT_HEIGHT {
        let min_height = (chart.chrome_height() + panels * MIN_PLOT_HEIGHT).ceil();
        return Err(bad_size(min_height.min(f64::from(u32::MAX)) as u32));
    }
    // The number of y ticks depends on the room, which is known only now.
    let room = chart.plot_height();
    for (panel, integral) in chart.panels.iter_mut().zip(integral) {
        panel.y.ticks = y_ticks(panel.y.lo, panel.y.hi, room, integral);
    }
    Ok(chart.render().into_string())
}

/// How points' epoch milliseconds become positions on the shared x axis.
struct TimeAxis {
    origin_ms: i64,
    unit_ms: f64,
    desc: &'static str,
    end: f64,
}

impl TimeAxis {
    fn new(first_ms: i64, last_ms: i64) -> Self {
        // i128: a garbage timestamp at either end of i64 must not overflow the subtraction.
        let span_ms = (i128::from(last_ms) - i128::from(first_ms)) as f64;
        let (unit_ms, desc) = if span_ms >= 2.0 * DAY_MS {
            (DAY_MS, "days since first point")
        } else {
            (HOUR_MS, "hours since first point")
        };
        // A single instant still needs an axis with some length to put its point and ticks on.
        let end = if span_ms > 0.0 {
            span_ms / unit_ms
        } else {
            1.0
        };
        TimeAxis {
            origin_ms: first_ms,
            unit_ms,
            desc,
            end,
        }
    }

    fn x(&self, at_ms: i64) -> f64 {
        (i128::from(at_ms) - i128::from(self.origin_ms)) as f64 / self.unit_ms
    }
}

/// Which runs cost so much more than the others that they need a cost panel of their own:
/// those above the widest ratio (at least [`SPLIT_RATIO`]) between consecutive final costs,
/// largest first. `None` when no such gap exists.
fn costly_runs(runs: &[(&str, &Timeline)]) -> Option<Vec<bool>> {
    let finals: Vec<f64> = runs
        .iter()
        .map(|(_, t)| {
            t.cost
                .iter()
                .copied()
                .filter(|c| c.is_finite())
                .fold(0.0f64, f64::max)
        })
        .collect();
    let mut order: Vec<usize> = (0..finals.len()).collect();
    order.sort_by(|&a, &b| finals[b].total_cmp(&finals[a]));
    let mut best: Option<(f64, usize)> = None;
    for k in 0..order.len().saturating_sub(1) {
        let (hi, lo) = (finals[order[k]], finals[order[k + 1]]);
        if hi <= 0.0 {
            break;
        }
        let ratio = hi / lo.max(hi * 1e-12);
        if ratio >= SPLIT_RATIO && best.is_none_or(|(r, _)| ratio > r) {
            best = Some((ratio, k));
        }
    }
    let (_, k) = best?;
    let mut costly = vec![false; runs.len()];
    for &i in &order[..=k] {
        costly[i] = true;
    }
    Some(costly)
}

/// Line width of the `i`th of `n` runs: the first widest, the last [`LINE_WIDTH`].
fn line_width(i: usize, n: usize) -> u32 {
    let below = u32::try_from(n.saturating_sub(1).saturating_sub(i)).unwrap_or(u32::MAX);
    LINE_WIDTH
        .saturating_add(below.saturating_mul(LINE_WIDTH_STEP))
        .min(MAX_LINE_WIDTH)
}

fn stroke(i: usize, n: usize) -> Stroke {
    Stroke {
        colour: colour(i),
        width: f64::from(line_width(i, n)),
        dash: None,
        class: None,
    }
}

/// The chart without its y ticks, which wait for the layout to say how many fit, and for each
/// panel whether it shows counts (whole-number ticks).
fn describe(
    runs: &[(&str, &Timeline)],
    axis: &TimeAxis,
    width: u32,
    height: u32,
) -> (Chart, Vec<bool>) {
    let n = runs.len();
    let lines = |value: &dyn Fn(&Timeline, usize) -> f64| -> Vec<Series> {
        runs.iter()
            .enumerate()
            .map(|(k, (_, t))| Series {
                points: (0..t.at_ms.len())
                    .map(|i| (axis.x(t.at_ms[i]), value(t, i)))
                    // A NaN or infinite cost is a bug upstream; leaving the point out keeps it
                    // from flattening the other policies' lines against the axis.
                    .filter(|(_, y)| y.is_finite())
                    .map(|(x, y)| (x, y.clamp(-LARGEST_Y, LARGEST_Y)))
                    .collect(),
                shape: Shape::Line,
                stroke: stroke(k, n),
            })
            .collect()
    };
    let mut panels = vec![
        panel("workers", true, lines(&|t, i| f64::from(t.workers[i]))),
        panel("jobs queued", true, lines(&|t, i| f64::from(t.queued[i]))),
    ];
    let cost = lines(&|t, i| t.cost[i]);
    match costly_runs(runs) {
        None => panels.push(panel("cost ($)", false, cost)),
        Some(costly) => {
            let (dear, cheap): (Vec<_>, Vec<_>) =
                cost.into_iter().zip(costly).partition(|(_, c)| *c);
            let strip = |v: Vec<(Series, bool)>| v.into_iter().map(|(s, _)| s).collect();
            panels.push(panel("cost ($)", false, strip(cheap)));
            panels.push(panel("cost ($), costliest", false, strip(dear)));
        }
    }
    // As many x ticks as fit without their labels touching, at most 10.
    let x_ticks = ((f64::from(width) - 140.0) / 70.0).clamp(2.0, 10.0) as usize;
    let integral = panels.iter().map(|(_, i)| *i).collect();
    let panels = panels.into_iter().map(|(p, _)| p).collect();
    let chart = Chart {
        width,
        height,
        font_size: FONT_SIZE,
        title: "trainscaler simulate".to_owned(),
        show_title: true,
        description: Some(format!(
            "Workers, jobs queued and cumulative cost over time of {n} policies."
        )),
        id: None,
        background: Some("#ffffff"),
        legend: runs
            .iter()
            .enumerate()
            .map(|(i, (name, _))| LegendEntry {
                label: (*name).to_owned(),
                stroke: stroke(i, n),
            })
            .collect(),
        x: Axis {
            lo: 0.0,
            hi: axis.end,
            ticks: nice_ticks(0.0, axis.end, x_ticks - 1, false)
                .into_iter()
                .map(tick)
                .collect(),
            label: axis.desc.to_owned(),
        },
        panels,
    };
    (chart, integral)
}

fn panel(label: &str, integral: bool, series: Vec<Series>) -> (Panel, bool) {
    let (lo, hi) = series
        .iter()
        .flat_map(|s| &s.points)
        .fold((0.0f64, 0.0f64), |(lo, hi), &(_, y)| (lo.min(y), hi.max(y)));
    let (lo, hi) = padded(lo, hi, integral);
    let panel = Panel {
        y: Axis {
            lo,
            hi,
            ticks: Vec::new(),
            label: label.to_owned(),
        },
        series,
    };
    (panel, integral)
}

/// As many ticks as fit `room` pixels, at most 6; counts at least one apart.
fn y_ticks(lo: f64, hi: f64, room: f64, integral: bool) -> Vec<Tick> {
    let mut count = (room / 28.0).clamp(2.0, 6.0) as usize;
    if integral {
        count = count.min((hi - lo).round().clamp(1.0, 5.0) as usize + 1);
    }
    nice_ticks(lo, hi, count.saturating_sub(1).max(1), integral)
        .into_iter()
        .map(tick)
        .collect()
}

fn tick(at: f64) -> Tick {
    Tick {
        at,
        label: short_number(at),
    }
}

/// The y range: from zero (or the lowest value, if something went below it) to a little over
/// the highest, so the top line isn't drawn on the frame.
fn padded(lo: f64, hi: f64, integral: bool) -> (f64, f64) {
    let span = hi - lo;
    if span <= 0.0 {
        return (lo, lo + 1.0);
    }
    let top = hi + span * 0.05;
    if integral {
        (lo, top.ceil())
    } else {
        (lo, top)
    }
}

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// A tick label without the trailing zeros of `{:.2}`, and with a k or M past a thousand so a
/// 90-day bill fits the label column.
fn short_number(v: f64) -> String {
    let (v, suffix) = match v.abs() {
        // Nobody's bill; but a 300-digit label would cover the chart.
        a if a >= 1e9 => return format!("{v:.1e}"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let s = if s == "-0" { "0" } else { s };
    format!("{s}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::svg_doc::SvgDoc;

    const DAY: i64 = 86_400_000;

    fn timeline(start_ms: i64, step_ms: i64, workers: &[u32], cost_per_worker: f64) -> Timeline {
        let mut cost = 0.0;
        Timeline {
            at_ms: (0..workers.len() as i64)
                .map(|i| start_ms + i * step_ms)
                .collect(),
            workers: workers.to_vec(),
            queued: workers.iter().map(|w| 10u32.saturating_sub(*w)).collect(),
            cost: workers
                .iter()
                .map(|w| {
                    cost += f64::from(*w) * cost_per_worker;
                    cost
                })
                .collect(),
        }
    }

    fn parse(svg: &str) -> SvgDoc {
        SvgDoc::parse(svg)
    }

    #[test]
    fn two_policies_well_formed_with_names_and_labels() {
        let a = timeline(
            1_700_000_000_000,
            DAY / 4,
            &[1, 2, 4, 4, 3, 1, 0, 2, 5, 2],
            3.06,
        );
        let b = timeline(
            1_700_000_000_000,
            DAY / 4,
            &[2, 2, 2, 3, 3, 3, 2, 2, 2, 2],
            0.92,
        );
        let svg =
            render_svg(&[("reactive", &a), ("spot & <cheap>", &b)], 900, 700).expect("chart draws");
        assert!(!svg.contains("<cheap>"), "the name is escaped");
        let doc = parse(&svg);
        for want in [
            "trainscaler simulate",
            "reactive",
            "spot & <cheap>",
            "workers",
            "jobs queued",
            "cost ($)",
            // 2.25 days: the day unit.
            "days since first point",
        ] {
            assert!(doc.has_text(want), "{want:?} missing: {:?}", doc.texts());
        }
        assert!(!doc.texts().iter().any(|t| t.contains("hours since")));
        // Same colour in all three panels and the legend: four strokes each.
        assert_eq!(doc.stroked_with(colour(0)), 4, "{svg}");
        assert_eq!(doc.stroked_with(colour(1)), 4, "{svg}");
        // A line per policy a panel, a vertex per timeline point.
        let series = doc.series();
        assert_eq!(series.len(), 6);
        assert!(series.iter().all(|s| s.points().len() == 10));
        // y ticks (the labels right-aligned to the axis) are whole workers and jobs, up past
        // the peak of 5 workers; the x ticks are in days.
        let y_labels: Vec<&str> = doc
            .named("text")
            .filter(|t| t.attr("text-anchor") == "end")
            .map(|t| t.text.as_str())
            .collect();
        assert!(
            y_labels.contains(&"6") && y_labels.iter().all(|l| !l.contains('.')),
            "{y_labels:?}"
        );
        assert!(
            doc.has_text("0.5") && doc.has_text("2"),
            "{:?}",
            doc.texts()
        );
    }

    #[test]
    fn each_policy_adds_a_line_per_panel_and_a_legend_swatch() {
        let runs: Vec<Timeline> = (0..4)
            .map(|k| timeline(0, 3_600_000, &[k, k + 1, k + 3, k], 1.0 + f64::from(k)))
            .collect();
        let lines = |n: usize| {
            let named: Vec<(String, &Timeline)> = runs
                .iter()
                .take(n)
                .enumerate()
                .map(|(i, t)| (format!("p{i}"), t))
                .collect();
            let refs: Vec<(&str, &Timeline)> =
                named.iter().map(|(s, t)| (s.as_str(), *t)).collect();
            let svg = render_svg(&refs, 800, 600).expect("chart draws");
            let doc = parse(&svg);
            assert!(
                doc.has_text("hours since first point"),
                "3 hours span: hours"
            );
            let swatches = doc
                .named("line")
                .filter(|l| l.attr("class") != "grid")
                .count();
            (doc.series().len(), swatches)
        };
        let counts: Vec<(usize, usize)> = (1..=4).map(lines).collect();
        assert_eq!(counts, vec![(3, 1), (6, 2), (9, 3), (12, 4)]);
    }

    #[test]
    fn empty_input_is_an_error_not_a_panic() {
        assert!(matches!(render_svg(&[], 800, 600), Err(ChartError::NoData)));
        let empty = Timeline::default();
        assert!(matches!(
            render_svg(&[("a", &empty), ("b", &empty)], 800, 600),
            Err(ChartError::NoData)
        ));
    }

    #[test]
    fn an_empty_run_beside_a_full_one_keeps_its_legend_entry() {
        let full = timeline(0, DAY, &[1, 2, 3], 1.0);
        let empty = Timeline::default();
        let svg = render_svg(&[("full", &full), ("empty", &empty)], 800, 600).expect("chart draws");
        let doc = parse(&svg);
        assert!(doc.has_text("full") && doc.has_text("empty"));
        // Its lines are there with no points, in its colour, beside its legend swatch. Having
        // cost nothing, it leaves the full one a cost panel of its own.
        let points: Vec<usize> = doc.series().iter().map(|s| s.points().len()).collect();
        assert_eq!(points, vec![3, 0, 3, 0, 0, 3]);
        assert_eq!(doc.stroked_with(colour(1)), 4);
    }

    #[test]
    fn ragged_timeline_is_refused() {
        let mut t = timeline(0, DAY, &[1, 2, 3], 1.0);
        t.cost.pop();
        let err = render_svg(&[("short", &t)], 800, 600).expect_err("ragged");
        assert!(
            matches!(err, ChartError::Ragged { ref policy, at: 3, cost: 2, .. } if policy == "short")
        );
    }

    #[test]
    fn degenerate_values_and_sizes_do_not_panic() {
        let single = timeline(5, DAY, &[0], 0.0);
        let extremes = Timeline {
            at_ms: vec![i64::MIN, 0, i64::MAX],
            workers: vec![u32::MAX, 0, 1],
            queued: vec![0, 0, 0],
            cost: vec![f64::NAN, f64::INFINITY, -1.0],
        };
        let huge = Timeline {
            at_ms: vec![0, 1],
            workers: vec![0, 0],
            queued: vec![0, 0],
            cost: vec![-f64::MAX, f64::MAX],
        };
        let long_name = "x".repeat(500);
        let many: Vec<(&str, &Timeline)> = (0..60).map(|_| (long_name.as_str(), &single)).collect();
        let inputs: [&[(&str, &Timeline)]; 3] = [
            &[("one point", &single)],
            &[("extremes", &extremes), ("huge", &huge)],
            &many,
        ];
        for runs in inputs {
            let mut drawn = 0;
            for (w, h) in [
                (0, 0),
                (1, 1),
                (319, 2000),
                (320, 500),
                (800, 600),
                (MAX_SIDE, MAX_SIDE),
                (u32::MAX, u32::MAX),
            ] {
                match render_svg(runs, w, h) {
                    Ok(svg) => {
                        assert!(!svg.contains("NaN") && !svg.contains("inf"));
                        parse(&svg);
                        drawn += 1;
                    }
                    Err(ChartError::BadSize { min_height, .. }) => {
                        // What the error asks for is enough, when the width is.
                        if (MIN_WIDTH..=MAX_SIDE).contains(&w) && min_height <= MAX_SIDE {
                            render_svg(runs, w, min_height).expect("the size asked for");
                        }
                    }
                    Err(e) => panic!("{w}x{h}: {e}"),
                }
            }
            // The odd values must be drawn somewhere, not only turned away by the size check.
            assert!(drawn > 0, "{} never drawn", runs[0].0);
        }
        let doc = parse(&render_svg(&[("one point", &single)], 800, 600).expect("drawn"));
        // One dot a panel stands in for the line.
        assert_eq!(doc.named("circle").count(), 3);
        assert!(doc.series().iter().all(|s| s.points().len() == 1));
        // The non-finite costs are left out, the rest kept.
        let doc = parse(&render_svg(&[("extremes", &extremes)], 800, 600).expect("drawn"));
        let points: Vec<usize> = doc.series().iter().map(|s| s.points().len()).collect();
        assert_eq!(points, vec![3, 3, 1]);
    }

    #[test]
    fn a_policy_twenty_times_dearer_gets_a_cost_panel_of_its_own() {
        let cheap = timeline(0, 3_600_000, &[1, 2, 2, 1], 1.0);
        let also_cheap = timeline(0, 3_600_000, &[1, 1, 2, 2], 1.2);
        let dear = timeline(0, 3_600_000, &[20, 20, 20, 20], 1.0);
        let runs = [
            ("cheap", &cheap),
            ("fixed", &dear),
            ("also cheap", &also_cheap),
        ];
        assert_eq!(costly_runs(&runs), Some(vec![false, true, false]));
        let svg = render_svg(&runs, 900, 800).expect("chart draws");
        let doc = parse(&svg);
        assert!(doc.has_text("cost ($), costliest"), "{:?}", doc.texts());
        // Each policy: workers, queue, its one cost panel and the legend.
        for i in 0..3 {
            assert_eq!(doc.stroked_with(colour(i)), 4, "policy {i}");
        }
        // The last panel holds the dear policy's line only.
        let panels = doc.named("g").filter(|g| g.attr("class") == "panel");
        assert_eq!(panels.count(), 4);
        assert_eq!(doc.series().last().unwrap().attr("stroke"), colour(1));
        // Costs within a factor of five share one panel.
        let close = [("a", &cheap), ("b", &also_cheap)];
        assert_eq!(costly_runs(&close), None);
        assert!(
            !parse(&render_svg(&close, 900, 700).unwrap())
                .texts()
                .iter()
                .any(|t| t.contains("costliest"))
        );
    }

    #[test]
    fn lines_narrow_in_policy_order_so_equal_ones_stay_visible() {
        assert_eq!(
            (0..5).map(|i| line_width(i, 5)).collect::<Vec<_>>(),
            vec![10, 8, 6, 4, 2]
        );
        assert_eq!(line_width(0, 60), MAX_LINE_WIDTH);
        assert_eq!(line_width(0, 1), LINE_WIDTH);
        let same = timeline(0, 3_600_000, &[1, 2, 2, 1], 1.0);
        let svg = render_svg(&[("first", &same), ("second", &same)], 800, 600).unwrap();
        let doc = parse(&svg);
        let widths: Vec<&str> = doc.series()[..2]
            .iter()
            .map(|s| s.attr("stroke-width"))
            .collect();
        assert_eq!(widths, vec!["4", "2"], "the first is wider and drawn first");
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(2.5), "2.5");
        assert_eq!(short_number(12.0), "12");
        assert_eq!(short_number(1250.0), "1.25k");
        assert_eq!(short_number(3_000_000.0), "3M");
        assert_eq!(short_number(-0.001), "0");
    }
}
