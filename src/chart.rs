//! The one SVG chart renderer: panels of line or step series stacked over a shared x axis,
//! with tick labels, axis descriptions, a legend and an accessible title. The fleet page's
//! desired-against-current chart and the simulator's policy comparison are both described as
//! a [`Chart`] and drawn here.
//!
//! Pure: a [`Chart`] in, markup out, no I/O. Callers choose ranges, ticks and colours (a time
//! axis in UTC minutes and one in days since the first point need different ticks); this
//! module only lays them out. All text goes through [`escape`], so a pool or policy named
//! `<script>` shows as text. The SVG writes `<text>` elements and leaves fonts to whatever
//! shows it: widths of text are estimated, never measured.

use crate::markup::{Html, escape, html};

/// A whole chart: size, text, legend, the shared x axis and the panels from top to bottom.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub width: u32,
    pub height: u32,
    /// Size of tick labels and legend text, in pixels; the rest of the layout scales with it.
    pub font_size: f64,
    /// The accessible name (`<title>`).
    pub title: String,
    /// Also draw the title as text on top of the chart.
    pub show_title: bool,
    /// A sentence for `<desc>`, the chart's text summary.
    pub description: Option<String>,
    /// Prefix of the ids of `<title>` and `<desc>`, which `aria-labelledby` points at; must
    /// be unique in a page holding several charts.
    pub id: Option<String>,
    /// Filled behind everything; `None` lets a page's own background (and dark mode) through.
    pub background: Option<&'static str>,
    pub legend: Vec<LegendEntry>,
    pub x: Axis,
    pub panels: Vec<Panel>,
}

/// A range in data units with its ticks and a description.
#[derive(Debug, Clone, Default)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    /// Ticks outside `lo..=hi` are left out.
    pub ticks: Vec<Tick>,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub at: f64,
    pub label: String,
}

/// One plotting area with its own y axis; series are drawn in order, later ones on top.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    pub y: Axis,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone)]
pub struct Series {
    /// (x, y) in data units. Points with a NaN or infinite coordinate are left out.
    pub points: Vec<(f64, f64)>,
    pub shape: Shape,
    pub stroke: Stroke,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Straight segments between points: one polyline vertex per point.
    Line,
    /// A value holds until the next point, then jumps: `2n - 1` vertices for `n` points.
    Step,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stroke {
    pub colour: &'static str,
    pub width: f64,
    /// An SVG `stroke-dasharray`, such as `"6 4"`.
    pub dash: Option<&'static str>,
    /// A class for a page's style sheet to recolour by (dark mode).
    pub class: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub struct LegendEntry {
    pub label: String,
    pub stroke: Stroke,
}

/// Legend labels longer than this are cut, so one long name can't push the others away.
const LEGEND_CHARS: usize = 40;
const SWATCH: f64 = 24.0;
const GRID: &str = "#d5dae0";

/// A round step (1, 2 or 5 times a power of ten) giving at most `intervals` intervals over
/// `span`; whole numbers only when `integral`, so counts aren't labelled 0.5 workers.
pub fn nice_step(span: f64, intervals: usize, integral: bool) -> f64 {
    let raw = span / intervals.max(1) as f64;
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|f| f * magnitude)
        // The slack absorbs the rounding of `powf`, so a span of exactly 4 steps takes them.
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude);
    if integral { step.max(1.0) } else { step }
}

/// Tick positions at multiples of [`nice_step`] within `lo..=hi`.
pub fn nice_ticks(lo: f64, hi: f64, intervals: usize, integral: bool) -> Vec<f64> {
    let step = nice_step(hi - lo, intervals, integral);
    let start = (lo / step).ceil() * step;
    let mut ticks = Vec::new();
    if !start.is_finite() {
        return ticks;
    }
    // Bounded: with the step found above no more than `intervals + 1` ticks fit.
    for k in 0..=intervals.max(1) + 1 {
        let t = start + k as f64 * step;
        if t > hi + step * 1e-9 {
            break;
        }
        // -0 would be labelled "-0".
        ticks.push(if t == 0.0 { 0.0 } else { t });
    }
    ticks
}

/// Where things go, in pixels.
struct Layout {
    margin: f64,
    left: f64,
    right: f64,
    title_h: f64,
    row_h: f64,
    /// Each legend entry's x offset from `left` and its row.
    legend: Vec<(f64, usize)>,
    panels_top: f64,
    panel_h: f64,
    /// Above each plot area.
    plot_pad: f64,
    /// Below each plot area, for the x tick labels.
    tick_band: f64,
    /// Below the last panel, for the x axis description.
    x_label_band: f64,
}

impl Chart {
    /// The font size, or a readable one in place of a zero, negative or NaN size.
    fn font(&self) -> f64 {
        if self.font_size.is_finite() && self.font_size > 0.0 {
            self.font_size
        } else {
            12.0
        }
    }

    fn layout(&self) -> Layout {
        let font = self.font();
        let margin = (font * 0.8).round();
        let widest_tick = self
            .panels
            .iter()
            .flat_map(|p| &p.y.ticks)
            .map(|t| t.label.chars().count())
            .max()
            .unwrap_or(1);
        // Rotated y description, then the tick labels (about 0.6 em a character), then a gap.
        let left = (margin + font * 1.6 + widest_tick as f64 * font * 0.6 + 8.0).round();
        let right = f64::from(self.width) - (font * 2.0).round();
        let row_h = (font * 1.8).round();
        let mut legend = Vec::with_capacity(self.legend.len());
        let (mut x, mut row) = (0.0, 0usize);
        for entry in &self.legend {
            let chars = entry.label.chars().count().min(LEGEND_CHARS);
            let w = SWATCH + 6.0 + chars as f64 * font * 0.6 + font * 1.2;
            if x > 0.0 && left + x + w > right {
                (x, row) = (0.0, row + 1);
            }
            legend.push((x, row));
            x += w;
        }
        let rows = legend.last().map_or(0, |(_, r)| r + 1);
        let title_h = if self.show_title {
            (font * 2.6).round()
        } else {
            0.0
        };
        let legend_h = rows as f64 * row_h;
        let panels_top = margin / 2.0 + title_h + legend_h;
        let x_label_band = (font * 1.8).round();
        let n = self.panels.len().max(1) as f64;
        let panel_h =
            ((f64::from(self.height) - panels_top - x_label_band - margin / 2.0) / n).max(0.0);
        Layout {
            margin,
            left,
            right,
            title_h,
            row_h,
            legend,
            panels_top,
            panel_h,
            plot_pad: (font * 0.8).round(),
            tick_band: (font * 1.8).round(),
            x_label_band,
        }
    }

    /// The height of each panel's plotting area at this size (zero when there is no room), so
    /// a caller can refuse a size too small to read.
    pub fn plot_height(&self) -> f64 {
        let l = self.layout();
        (l.panel_h - l.plot_pad - l.tick_band).max(0.0)
    }

    /// Pixels of the height taken by everything but the plotting areas (title, legend, tick
    /// labels and margins), whatever the height: a chart needs at least this plus its panels.
    pub fn chrome_height(&self) -> f64 {
        let l = self.layout();
        let n = self.panels.len().max(1) as f64;
        l.panels_top + l.x_label_band + l.margin / 2.0 + n * (l.plot_pad + l.tick_band)
    }

    /// The chart as an SVG document (also fit to put inline into HTML).
    pub fn render(&self) -> Html {
        let l = self.layout();
        let font = self.font();
        let mut svg = Html::with_capacity(8192);
        svg.push(html!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" viewBox=\"0 0 {0} {1}\" \
             width=\"{0}\" height=\"{1}\" font-size=\"{2}\" font-family=\"sans-serif\"",
            self.width,
            self.height,
            font,
        ));
        match (&self.id, &self.description) {
            (Some(id), Some(_)) => {
                svg.push(html!(" aria-labelledby=\"{0}-title {0}-desc\"", escape(id)))
            }
            (Some(id), None) => svg.push(html!(" aria-labelledby=\"{}-title\"", escape(id))),
            (None, _) => {}
        }
        svg.push_lit(">\n");
        let id_attr = |suffix: &'static str| match &self.id {
            Some(id) => html!(" id=\"{}-{}\"", escape(id), escape(suffix)),
            None => Html::default(),
        };
        svg.push(html!(
            "<title{}>{}</title>\n",
            id_attr("title"),
            escape(&self.title)
        ));
        if let Some(d) = &self.description {
            svg.push(html!("<desc{}>{}</desc>\n", id_attr("desc"), escape(d)));
        }
        if let Some(bg) = self.background {
            svg.push(html!(
                "<rect width=\"100%\" height=\"100%\" fill=\"{}\"/>\n",
                escape(bg)
            ));
        }
        if self.show_title {
            svg.push(html!(
                "<text class=\"title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"{:.1}\" \
                 text-anchor=\"middle\">{}</text>\n",
                f64::from(self.width) / 2.0,
                l.margin / 2.0 + l.title_h * 0.7,
                font * 1.6,
                escape(&self.title)
            ));
        }
        self.legend_into(&mut svg, &l);
        for (i, panel) in self.panels.iter().enumerate() {
            self.panel_into(&mut svg, &l, panel, i, font);
        }
        svg.push_lit("</svg>\n");
        svg
    }

    fn legend_into(&self, svg: &mut Html, l: &Layout) {
        if self.legend.is_empty() {
            return;
        }
        svg.push_lit("<g class=\"legend\">\n");
        for (entry, &(x, row)) in self.legend.iter().zip(&l.legend) {
            let x = l.left + x;
            let y = l.margin / 2.0 + l.title_h + row as f64 * l.row_h + l.row_h / 2.0;
            let shown: String = if entry.label.chars().count() > LEGEND_CHARS {
                entry
                    .label
                    .chars()
                    .take(LEGEND_CHARS - 1)
                    .chain(['…'])
                    .collect()
            } else {
                entry.label.clone()
            };
            // Swatches at least 3 wide so a thin line's colour can still be told.
            let stroke = Stroke {
                width: entry.stroke.width.max(3.0),
                ..entry.stroke
            };
            svg.push(html!(
                "<line{}{} x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" dominant-baseline=\"middle\">{}</text>\n",
                class_attr(&stroke, None),
                stroke_attrs(&stroke),
                x,
                x + SWATCH,
                y,
                y,
                x + SWATCH + 6.0,
                y,
                escape(shown),
            ));
        }
        svg.push_lit("</g>\n");
    }

    fn panel_into(&self, svg: &mut Html, l: &Layout, panel: &Panel, index: usize, font: f64) {
        let top = l.panels_top + index as f64 * l.panel_h + l.plot_pad;
        let bottom = (l.panels_top + (index + 1) as f64 * l.panel_h - l.tick_band).max(top);
        let (left, right) = (l.left, l.right.max(l.left));
        let px = |x: f64| left + fraction(x, self.x.lo, self.x.hi) * (right - left);
        let py = |y: f64| bottom - fraction(y, panel.y.lo, panel.y.hi) * (bottom - top);
        svg.push_lit("<g class=\"panel\">\n");
        for t in in_range(&panel.y) {
            let y = py(t.at);
            svg.push(html!(
                "<line class=\"grid\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" \
                 stroke=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" \
                 dominant-baseline=\"middle\">{}</text>\n",
                left,
                right,
                y,
                y,
                escape(GRID),
                left - 6.0,
                y,
                escape(&t.label),
            ));
        }
        for t in in_range(&self.x) {
            let x = px(t.at);
            svg.push(html!(
                "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" \
                 stroke=\"{3}\"/><text x=\"{0:.1}\" y=\"{4:.1}\" text-anchor=\"middle\">{5}</text>\n",
                x,
                top,
                bottom + 4.0,
                escape(GRID),
                bottom + font * 1.3,
                escape(&t.label),
            ));
        }
        // The axes, in the text colour of whatever shows the chart.
        svg.push(html!(
            "<polyline class=\"axis\" fill=\"none\" stroke=\"currentColor\" \
             points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"/>\n",
            left,
            top,
            left,
            bottom,
            right,
            bottom,
        ));
        let middle = (top + bottom) / 2.0;
        let label_x = l.margin + font * 0.6;
        svg.push(html!(
            "<text x=\"{0:.1}\" y=\"{1:.1}\" text-anchor=\"middle\" \
             transform=\"rotate(-90 {0:.1} {1:.1})\">{2}</text>\n",
            label_x,
            middle,
            escape(&panel.y.label),
        ));
        if index + 1 == self.panels.len() {
            svg.push(html!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
                (left + right) / 2.0,
                bottom + l.tick_band + l.x_label_band * 0.6,
                escape(&self.x.label),
            ));
        }
        for s in &panel.series {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| (px(x), py(y)))
                .collect();
            svg.push(html!(
                "<polyline{} fill=\"none\"{} points=\"{}\"/>\n",
                class_attr(&s.stroke, Some("series")),
                stroke_attrs(&s.stroke),
                points_attr(&pts, s.shape),
            ));
            if let [(x, y)] = pts[..] {
                // A line through one point draws nothing; a dot at least shows the value.
                svg.push(html!(
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{:.1}\" fill=\"{}\"/>\n",
                    x,
                    y,
                    s.stroke.width.max(3.0),
                    escape(s.stroke.colour),
                ));
            }
        }
        svg.push_lit("</g>\n");
    }
}

fn in_range(axis: &Axis) -> impl Iterator<Item = &Tick> {
    let (lo, hi) = (axis.lo.min(axis.hi), axis.lo.max(axis.hi));
    let slack = (hi - lo).abs() * 1e-9;
    axis.ticks
        .iter()
        .filter(move |t| t.at >= lo - slack && t.at <= hi + slack)
}

/// Where `v` lies between `lo` and `hi`, from 0 to 1; 0 for a range of no width.
fn fraction(v: f64, lo: f64, hi: f64) -> f64 {
    let f = (v - lo) / (hi - lo);
    if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

fn stroke_attrs(s: &Stroke) -> Html {
    let mut out = html!(
        " stroke=\"{}\" stroke-width=\"{}\"",
        escape(s.colour),
        s.width
    );
    if let Some(dash) = s.dash {
        out.push(html!(" stroke-dasharray=\"{}\"", escape(dash)));
    }
    out
}

/// The stroke's class, or `default` when it has none (an element takes one class attribute).
fn class_attr(s: &Stroke, default: Option<&'static str>) -> Html {
    match s.class.or(default) {
        Some(class) => html!(" class=\"{}\"", escape(class)),
        None => Html::default(),
    }
}

fn points_attr(pts: &[(f64, f64)], shape: Shape) -> Html {
    let mut out = Vec::with_capacity(pts.len() * 2);
    for (i, &(x, y)) in pts.iter().enumerate() {
        if i > 0 && shape == Shape::Step {
            out.push(html!("{:.1},{:.1}", x, pts[i - 1].1));
        }
        out.push(html!("{:.1},{:.1}", x, y));
    }
    Html::join(out, " ")
}

#[cfg(test)]
pub(crate) mod svg_doc;

#[cfg(test)]
mod tests;
