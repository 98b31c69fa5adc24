//! The picture of a `simulate` run: policies' timelines as one SVG, so a person can see at a
//! glance where a policy ran more workers, let the queue grow or spent faster.
//!
//! Three panels share one time axis (workers, jobs queued, cumulative dollars), one line per
//! policy in the same colour in every panel, with the legend in a strip of its own above them
//! so it never hides a line. Only plotters' SVG backend is used: it writes `<text>` elements
//! and leaves fonts to whatever shows the file, so no font files are needed to draw.
//!
//! Two things keep it readable whatever the policies do. When some policies cost many times
//! what the others do (a fixed on-demand fleet beside autoscaled ones), the costly ones get
//! a cost panel of their own, so the others' lines are not flattened against the axis. And
//! lines are drawn widest first, each narrower than the one before, so two policies that did
//! exactly the same show as a line inside a wider one rather than one hiding the other.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
    /// The drawing library failed; with an in-memory SVG this is a bug rather than an input.
    #[error("drawing the chart: {0}")]
    Draw(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Values are cut to this. plotters' tick search loops forever on a range whose width overflows
/// to infinity, and a point far outside the range overflows its `i32` pixel arithmetic (a
/// panic in debug builds), so the range must be finite and hold every point.
const LARGEST_Y: f64 = 1e300;

/// The largest side accepted. plotters' pixel coordinates are `i32`, so a side near `u32::MAX`
/// would wrap; no screen needs more than this, and it bounds what a request can ask for.
pub const MAX_SIDE: u32 = 10_000;

const MIN_WIDTH: u32 = 320;
/// Below this a panel has no room for its tick labels between the axis description and data.
const MIN_PANEL_HEIGHT: u32 = 120;

const FONT: &str = "sans-serif";
const TITLE_SIZE: u32 = 26;
const LABEL_SIZE: u32 = 15;
const LEGEND_SIZE: u32 = 16;
const LEGEND_ROW: u32 = 24;
const LEGEND_SWATCH: i32 = 24;
const MARGIN: u32 = 10;
/// Same for every panel so their plotting areas line up under each other.
const Y_LABEL_AREA: u32 = 70;
const X_LABEL_AREA: u32 = 24;
/// The bottom panel also carries the x axis description.
const X_LABEL_AREA_BOTTOM: u32 = 44;
/// At least what `DrawingArea::titled` takes off the top with the rough text metrics plotters
/// uses when built without its `ttf` feature.
const TITLE_BAND: u32 = TITLE_SIZE + 10;

/// Okabe–Ito's colour-blind-safe set, black left out since axes are black. Past seven policies
/// the colours repeat; the legend order still tells them apart.
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
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

    let names: Vec<&str> = runs.iter().map(|(name, _)| *name).collect();
    let legend_rows = legend_layout(&names, width.saturating_sub(2 * MARGIN + Y_LABEL_AREA)).1;
    let legend_height = legend_rows
        .saturating_mul(LEGEND_ROW)
        .saturating_add(MARGIN);
    let costly = costly_runs(runs);
    let panels = if costly.is_some() { 4 } else { 3 };
    let min_height = legend_height.saturating_add(TITLE_BAND + panels * MIN_PANEL_HEIGHT);
    if width < MIN_WIDTH || height < min_height || width > MAX_SIDE || height > MAX_SIDE {
        return Err(ChartError::BadSize {
            width,
            height,
            policies: runs.len(),
            min_width: MIN_WIDTH,
            min_height,
        });
    }

    let axis = TimeAxis::new(*first, *last);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        draw(&root, runs, &axis, legend_height, costly.as_deref())?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

fn draw_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> ChartError {
    ChartError::Draw(Box::new(e))
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

fn draw(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    runs: &[(&str, &Timeline)],
    axis: &TimeAxis,
    legend_height: u32,
    costly: Option<&[bool]>,
) -> Result<(), ChartError> {
    root.fill(&WHITE).map_err(draw_error)?;
    let body = root
        .titled("trainscaler simulate", (FONT, TITLE_SIZE))
        .map_err(draw_error)?;
    let (legend, panels) = body.split_vertically(legend_height);
    draw_legend(&legend, runs)?;

    let panels = panels.split_evenly((if costly.is_some() { 4 } else { 3 }, 1));
    let series = |value: &dyn Fn(&Timeline, usize) -> f64| -> Vec<Vec<(f64, f64)>> {
        runs.iter()
            .map(|(_, t)| {
                (0..t.at_ms.len())
                    .map(|i| (axis.x(t.at_ms[i]), value(t, i)))
                    // A NaN or infinite cost is a bug upstream; leaving the point out keeps it
                    // from flattening the other policies' lines against the axis.
                    .filter(|(_, y)| y.is_finite())
                    .map(|(x, y)| (x, y.clamp(-LARGEST_Y, LARGEST_Y)))
                    .collect()
            })
            .collect()
    };
    let mut specs = vec![
        Panel {
            y_desc: "workers",
            integral: true,
            lines: series(&|t, i| f64::from(t.workers[i])),
        },
        Panel {
            y_desc: "jobs queued",
            integral: true,
            lines: series(&|t, i| f64::from(t.queued[i])),
        },
    ];
    let cost = series(&|t, i| t.cost[i]);
    match costly {
        None => specs.push(Panel {
            y_desc: "cost ($)",
            integral: false,
            lines: cost,
        }),
        Some(costly) => {
            // Each panel keeps every run's slot (so colours and widths stay), empty where the
            // run belongs to the other panel.
            let pick = |want: bool| -> Vec<Vec<(f64, f64)>> {
                cost.iter()
                    .zip(costly)
                    .map(|(line, &c)| if c == want { line.clone() } else { Vec::new() })
                    .collect()
            };
            specs.push(Panel {
                y_desc: "cost ($)",
                integral: false,
                lines: pick(false),
            });
            specs.push(Panel {
                y_desc: "cost ($), costliest",
                integral: false,
                lines: pick(true),
            });
        }
    }
    let last = specs.len() - 1;
    for (i, (area, spec)) in panels.iter().zip(&specs).enumerate() {
        draw_panel(area, spec, axis, i == last)?;
    }
    Ok(())
}

struct Panel {
    y_desc: &'static str,
    /// Counts get whole-number ticks; plotters would otherwise label 0.5 workers.
    integral: bool,
    /// One line per run, in run order, so the index picks the colour.
    lines: Vec<Vec<(f64, f64)>>,
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    panel: &Panel,
    axis: &TimeAxis,
    bottom: bool,
) -> Result<(), ChartError> {
    let (lo, hi) = panel
        .lines
        .iter()
        .flatten()
        .fold((0.0f64, 0.0f64), |(lo, hi), &(_, y)| (lo.min(y), hi.max(y)));
    let y_range = padded(lo, hi, panel.integral);
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .x_label_area_size(if bottom {
            X_LABEL_AREA_BOTTOM
        } else {
            X_LABEL_AREA
        })
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0.0..axis.end, y_range.clone())
        .map_err(draw_error)?;

    // As many ticks as fit without their labels touching, at most 10 across and 6 up.
    let (plot_w, plot_h) = chart.plotting_area().dim_in_pixel();
    let x_labels = (plot_w / 70).clamp(2, 10) as usize;
    let mut y_labels = (plot_h / 28).clamp(2, 6) as usize;
    if panel.integral {
        // Ticks at least one apart: plotters picks the finest 1-2-5 step that fits the count.
        y_labels = y_labels.min((y_range.end - y_range.start).round().clamp(1.0, 5.0) as usize + 1);
    }
    let tick = |v: &f64| short_number(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(x_labels)
        .y_labels(y_labels)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE + 1))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.1))
        .y_desc(panel.y_desc);
    if bottom {
        mesh.x_desc(axis.desc);
    }
    mesh.draw().map_err(draw_error)?;

    let n = panel.lines.len();
    for (i, line) in panel.lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        let style = colour(i).stroke_width(line_width(i, n));
        let mut series = LineSeries::new(line.iter().copied(), style);
        if line.len() == 1 {
            // A line through one point draws nothing; a dot at least shows the value.
            series = series.point_size(3);
        }
        chart.draw_series(series).map_err(draw_error)?;
    }
    Ok(())
}

/// The y range: from zero (or the lowest value, if something went below it) to a little over
/// the highest, so the top line isn't drawn on the frame.
fn padded(lo: f64, hi: f64, integral: bool) -> Range<f64> {
    let span = hi - lo;
    if span <= 0.0 {
        return lo..lo + 1.0;
    }
    let top = hi + span * 0.05;
    if integral { lo..top.ceil() } else { lo..top }
}

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// Policy names left to right, wrapping to a new row when the next one would pass `width`:
/// each entry's x offset and row, and the number of rows.
fn legend_layout(names: &[&str], width: u32) -> (Vec<(i32, u32)>, u32) {
    let mut at = Vec::with_capacity(names.len());
    let (mut x, mut row) = (0u32, 0u32);
    for name in names {
        let w = legend_entry_width(name);
        if x > 0 && x + w > width {
            (x, row) = (0, row + 1);
        }
        at.push((x as i32, row));
        x += w;
    }
    let rows = if names.is_empty() { 0 } else { row + 1 };
    (at, rows)
}

/// Swatch, gap, text and trailing space. The SVG backend can't measure text, so its width is
/// a guess: half the font size a character, a little over what sans-serif fonts take once
/// plotters has scaled the size down by 1.24. Names are cut at 40 characters.
fn legend_entry_width(name: &str) -> u32 {
    let chars = name.chars().count().min(LEGEND_NAME_CHARS) as u32;
    LEGEND_SWATCH as u32 + 6 + chars * LEGEND_SIZE / 2 + 20
}

const LEGEND_NAME_CHARS: usize = 40;

fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    runs: &[(&str, &Timeline)],
) -> Result<(), ChartError> {
    let names: Vec<&str> = runs.iter().map(|(name, _)| *name).collect();
    let (width, _) = area.dim_in_pixel();
    let left = (MARGIN + Y_LABEL_AREA) as i32;
    let (at, _) = legend_layout(&names, width.saturating_sub(2 * MARGIN + Y_LABEL_AREA));
    let text =
        TextStyle::from((FONT, LEGEND_SIZE).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (name, (x, row))) in names.iter().zip(at).enumerate() {
        let x = left + x;
        let y = (row * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        area.draw(&PathElement::new(
            vec![(x, y), (x + LEGEND_SWATCH, y)],
            colour(i).stroke_width(line_width(i, names.len()).max(3)),
        ))
        .map_err(draw_error)?;
        let shown: String = if name.chars().count() > LEGEND_NAME_CHARS {
            name.chars()
                .take(LEGEND_NAME_CHARS - 1)
                .chain(['…'])
                .collect()
        } else {
            (*name).to_string()
        };
        area.draw(&Text::new(shown, (x + LEGEND_SWATCH + 6, y), text.clone()))
            .map_err(draw_error)?;
    }
    Ok(())
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
    use quick_xml::Reader;
    use quick_xml::escape::resolve_predefined_entity;
    use quick_xml::events::{BytesStart, Event};

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

    struct Doc {
        /// Element name and its `stroke` attribute (empty when it has none), in document order.
        elements: Vec<(String, String)>,
        /// Text content, a line per closed element, entities resolved.
        text: String,
    }

    impl Doc {
        /// Lines in a policy's colour: series and legend swatches, not the black axes and
        /// tick marks plotters also draws as polylines.
        fn coloured_lines(&self) -> usize {
            self.elements
                .iter()
                .filter(|(name, stroke)| {
                    matches!(name.as_str(), "polyline" | "path") && stroke != "#000000"
                })
                .count()
        }

        fn stroked_with(&self, c: RGBColor) -> usize {
            let want = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
            self.elements.iter().filter(|(_, s)| *s == want).count()
        }
    }

    /// Parses the whole document, failing on any malformed or mismatched tag.
    fn parse(svg: &str) -> Doc {
        let mut reader = Reader::from_str(svg);
        let (mut elements, mut text) = (Vec::new(), String::new());
        let mut depth = 0i32;
        let element = |e: &BytesStart| {
            let stroke = e
                .try_get_attribute("stroke")
                .expect("attributes parse")
                .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                .unwrap_or_default();
            (
                String::from_utf8_lossy(e.name().as_ref()).into_owned(),
                stroke,
            )
        };
        loop {
            match reader.read_event() {
                Ok(Event::Start(e)) => {
                    depth += 1;
                    elements.push(element(&e));
                }
                Ok(Event::Empty(e)) => elements.push(element(&e)),
                Ok(Event::End(_)) => {
                    depth -= 1;
                    text.push('\n');
                }
                Ok(Event::Text(t)) => text.push_str(&t.decode().expect("text decodes")),
                // quick-xml hands `&amp;` and friends over as their own events.
                Ok(Event::GeneralRef(r)) => {
                    let name = r.decode().expect("reference decodes");
                    match resolve_predefined_entity(&name) {
                        Some(s) => text.push_str(s),
                        None => panic!("unknown entity &{name}; in\n{svg}"),
                    }
                }
                Ok(Event::Eof) => break,
                Ok(_) => {}
                Err(e) => panic!("malformed SVG at {}: {e}\n{svg}", reader.buffer_position()),
            }
        }
        assert_eq!(depth, 0, "unclosed elements");
        assert_eq!(elements.first().map(|(n, _)| n.as_str()), Some("svg"));
        Doc { elements, text }
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
        let Doc { text, .. } = parse(&svg);
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
            assert!(
                text.contains(want),
                "{want:?} missing from the chart text:\n{text}"
            );
        }
        assert!(!text.contains("hours since"));
        // Same colour in all three panels and the legend: four strokes each.
        let doc = parse(&svg);
        assert_eq!(doc.stroked_with(colour(0)), 4, "{svg}");
        assert_eq!(doc.stroked_with(colour(1)), 4, "{svg}");
        assert_eq!(doc.coloured_lines(), 8);
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
                doc.text.contains("hours since first point"),
                "3 hours span: hours"
            );
            doc.coloured_lines()
        };
        let counts: Vec<usize> = (1..=4).map(lines).collect();
        assert_eq!(counts, vec![4, 8, 12, 16]);
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
        assert!(doc.text.contains("full") && doc.text.contains("empty"));
        // Three panel lines and two legend swatches.
        assert_eq!(doc.coloured_lines(), 5);
        assert_eq!(doc.stroked_with(colour(1)), 1);
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
                        parse(&svg);
                        drawn += 1;
                    }
                    Err(ChartError::BadSize { .. }) => {}
                    Err(e) => panic!("{w}x{h}: {e}"),
                }
            }
            // The odd values must be drawn somewhere, not only turned away by the size check.
            assert!(drawn > 0, "{} never drawn", runs[0].0);
        }
        let doc = parse(&render_svg(&[("one point", &single)], 800, 600).expect("drawn"));
        // One dot a panel stands in for the line.
        let dots = doc.elements.iter().filter(|(n, _)| n == "circle").count();
        assert_eq!(dots, 3);
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
        assert!(doc.text.contains("cost ($), costliest"), "{}", doc.text);
        // Each policy: workers, queue, its one cost panel and the legend.
        for i in 0..3 {
            assert_eq!(doc.stroked_with(colour(i)), 4, "policy {i}");
        }
        // Costs within a factor of five share one panel.
        let close = [("a", &cheap), ("b", &also_cheap)];
        assert_eq!(costly_runs(&close), None);
        assert!(
            !parse(&render_svg(&close, 900, 700).unwrap())
                .text
                .contains("costliest")
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
        assert!(svg.contains("stroke-width=\"4\""), "the first is wider");
        assert!(svg.contains("stroke-width=\"2\""), "the second is narrower");
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
