use super::svg_doc::SvgDoc;
use super::*;

const BLUE: Stroke = Stroke {
    colour: "#0072b2",
    width: 2.0,
    dash: None,
    class: None,
};
const ORANGE: Stroke = Stroke {
    colour: "#e69f00",
    width: 4.0,
    dash: Some("6 4"),
    class: Some("desired"),
};

fn ticks(at: &[f64]) -> Vec<Tick> {
    at.iter()
        .map(|&a| Tick {
            at: a,
            label: format!("t{a}"),
        })
        .collect()
}

fn chart(panels: Vec<Panel>, legend: Vec<LegendEntry>) -> Chart {
    Chart {
        width: 600,
        height: 400,
        font_size: 12.0,
        title: "a <b>title</b> & more".to_owned(),
        show_title: true,
        description: Some("what it shows".to_owned()),
        id: Some("c0".to_owned()),
        background: Some("#ffffff"),
        legend,
        x: Axis {
            lo: 0.0,
            hi: 10.0,
            ticks: ticks(&[0.0, 5.0, 10.0, 11.0]),
            label: "time".to_owned(),
        },
        panels,
    }
}

fn panel(label: &str, series: Vec<Series>) -> Panel {
    Panel {
        y: Axis {
            lo: 0.0,
            hi: 4.0,
            ticks: ticks(&[0.0, 2.0, 4.0]),
            label: label.to_owned(),
        },
        series,
    }
}

fn series(points: &[(f64, f64)], shape: Shape, stroke: Stroke) -> Series {
    Series {
        points: points.to_vec(),
        shape,
        stroke,
    }
}

#[test]
fn one_polyline_per_series_with_a_vertex_per_point_or_two_per_step() {
    let line = [(0.0, 0.0), (2.0, 1.0), (7.0, 4.0), (10.0, 3.0)];
    let c = chart(
        vec![
            panel(
                "upper",
                vec![
                    series(&line, Shape::Line, BLUE),
                    series(&line, Shape::Step, ORANGE),
                ],
            ),
            panel("lower", vec![series(&line[..2], Shape::Line, BLUE)]),
        ],
        vec![],
    );
    let doc = SvgDoc::parse(c.render().as_str());
    let series = doc.series();
    assert_eq!(series.len(), 3);
    assert_eq!(series[0].points().len(), 4);
    assert_eq!(series[1].points().len(), 2 * 4 - 1);
    assert_eq!(series[2].points().len(), 2);
    // The step holds the old value until the next point's x, then jumps.
    let step = series[1].points();
    assert_eq!(step[1].0, step[2].0);
    assert_eq!(step[0].1, step[1].1);
    // Both panels' series share x positions; the upper panel is above the lower.
    assert_eq!(series[0].points()[0].0, series[2].points()[0].0);
    assert!(series[0].points()[0].1 < series[2].points()[0].1);
    // x grows to the right, y up: the first point (0, 0) is bottom left.
    let p = series[0].points();
    assert!(p[0].0 < p[3].0 && p[2].1 < p[0].1, "{p:?}");
    assert_eq!(series[1].attr("stroke-dasharray"), "6 4");
    assert_eq!(series[1].attr("class"), "desired");
    assert_eq!(series[0].attr("class"), "series");
}

#[test]
fn axis_labels_ticks_and_title_are_there_and_escaped() {
    let c = chart(
        vec![
            panel("workers", vec![series(&[(1.0, 1.0)], Shape::Line, BLUE)]),
            panel("cost ($)", vec![]),
        ],
        vec![
            LegendEntry {
                label: "<script>".to_owned(),
                stroke: BLUE,
            },
            LegendEntry {
                label: "spot & \"cheap\"".to_owned(),
                stroke: ORANGE,
            },
        ],
    );
    let svg = c.render().into_string();
    assert!(!svg.contains("<script>") && !svg.contains("<b>"), "{svg}");
    let doc = SvgDoc::parse(&svg);
    for want in [
        "workers",
        "cost ($)",
        "time",
        "<script>",
        "spot & \"cheap\"",
    ] {
        assert!(doc.has_text(want), "{want:?} missing: {:?}", doc.texts());
    }
    // The x axis description once, under the last panel; ticks under every panel, the one
    // outside the range left out.
    assert_eq!(doc.texts().iter().filter(|t| **t == "time").count(), 1);
    assert_eq!(doc.texts().iter().filter(|t| **t == "t5").count(), 2);
    assert!(!doc.has_text("t11"));
    assert_eq!(doc.texts().iter().filter(|t| **t == "t2").count(), 2);
    let title = doc.named("title").next().expect("a title");
    assert_eq!(title.text, "a <b>title</b> & more");
    assert_eq!(title.attr("id"), "c0-title");
    assert_eq!(doc.named("desc").next().unwrap().attr("id"), "c0-desc");
    assert_eq!(doc.elements[0].attr("aria-labelledby"), "c0-title c0-desc");
    assert!(doc.has_text("a <b>title</b> & more"), "shown on top too");
    // Legend swatches in the series' colours, inside the legend group.
    let swatches: Vec<_> = doc
        .named("line")
        .filter(|l| l.ancestors.iter().any(|a| a == "g") && l.attr("stroke") != GRID)
        .collect();
    assert_eq!(swatches.len(), 2);
    assert_eq!(swatches[1].attr("stroke"), ORANGE.colour);
    assert_eq!(
        swatches[0].attr("stroke-width"),
        "3",
        "thin lines get a wider swatch"
    );
    // Blue: the one series and its swatch; orange: a swatch only.
    assert_eq!(doc.stroked_with(BLUE.colour), 2);
    assert_eq!(doc.stroked_with(ORANGE.colour), 1);
}

#[test]
fn empty_and_one_point_series_render_valid_svg() {
    let c = chart(
        vec![panel(
            "p",
            vec![
                series(&[], Shape::Line, BLUE),
                series(&[(5.0, 2.0)], Shape::Line, ORANGE),
                series(&[(5.0, 2.0)], Shape::Step, BLUE),
                series(&[(f64::NAN, 1.0), (1.0, f64::INFINITY)], Shape::Line, BLUE),
            ],
        )],
        vec![],
    );
    let doc = SvgDoc::parse(c.render().as_str());
    let counts: Vec<usize> = doc.series().iter().map(|s| s.points().len()).collect();
    assert_eq!(counts, vec![0, 1, 1, 0]);
    // A dot for each one-point series, in its colour.
    let dots: Vec<_> = doc.named("circle").collect();
    assert_eq!(dots.len(), 2);
    assert_eq!(dots[0].attr("fill"), ORANGE.colour);
    // Nothing at all: no panels, no legend, no size.
    let bare = Chart::default().render();
    let doc = SvgDoc::parse(bare.as_str());
    assert!(doc.series().is_empty());
}

#[test]
fn odd_ranges_and_sizes_stay_finite() {
    for (lo, hi) in [(0.0, 0.0), (5.0, 1.0), (-1e300, 1e300), (f64::NAN, 1.0)] {
        let mut c = chart(
            vec![panel(
                "p",
                vec![series(&[(0.0, lo), (10.0, hi)], Shape::Step, BLUE)],
            )],
            vec![],
        );
        c.panels[0].y.lo = lo;
        c.panels[0].y.hi = hi;
        c.width = 1;
        c.height = 1;
        let svg = c.render().into_string();
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        SvgDoc::parse(&svg);
    }
}

#[test]
fn plot_height_shrinks_with_the_legend() {
    let mut c = chart(vec![panel("a", vec![]), panel("b", vec![])], vec![]);
    let bare = c.plot_height();
    assert!(bare > 100.0, "{bare}");
    c.legend = (0..6)
        .map(|i| LegendEntry {
            label: format!("policy number {i}"),
            stroke: BLUE,
        })
        .collect();
    assert!(c.plot_height() < bare);
    let chrome = c.chrome_height();
    assert!((chrome + 2.0 * c.plot_height() - 400.0).abs() < 1e-9);
    c.height = 10;
    assert_eq!(c.plot_height(), 0.0);
    assert_eq!(c.chrome_height(), chrome, "the same at any height");
}

#[test]
fn round_steps_and_ticks() {
    assert_eq!(nice_step(1.0, 4, true), 1.0);
    assert_eq!(nice_step(4.0, 4, true), 1.0);
    assert_eq!(nice_step(7.0, 4, true), 2.0);
    assert_eq!(nice_step(37.0, 4, true), 10.0);
    assert_eq!(nice_step(1.0, 4, false), 0.5);
    assert_eq!(nice_step(0.0, 4, false), 1.0);
    assert_eq!(
        nice_ticks(0.0, 10.0, 5, false),
        vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    );
    assert_eq!(nice_ticks(-3.0, 3.0, 3, true), vec![-2.0, 0.0, 2.0]);
    assert!(nice_ticks(-1e300, 1.1e300, 6, false).len() <= 7);
    assert!(nice_ticks(f64::NAN, 1.0, 6, false).is_empty());
}
