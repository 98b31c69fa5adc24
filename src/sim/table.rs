//! The terminal table of `trainscaler simulate`: one row per policy, the figures people
//! compare first, aligned.

use crate::core::sim::report::PolicyReport;

/// Renders the reports as a fixed-width table.
pub fn render(reports: &[PolicyReport]) -> String {
    let header = [
        "policy",
        "cost $",
        "on-demand $",
        "spot $",
        "vs fixed",
        "GPU-h paid",
        "GPU-h used",
        "idle",
        "wait p50",
        "wait p95",
        "makespan",
        "interrupts",
        "lost GPU-h",
        "scalings",
        "unfinished",
    ];
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                format!("{:.2}", r.total_cost),
                format!("{:.2}", r.cost_by_market.on_demand),
                format!("{:.2}", r.cost_by_market.spot),
                r.saving_vs_fixed_on_demand
                    .map_or("-".into(), |s| match -s * 100.0 {
                        x if x.abs() < 0.05 => "0.0%".into(),
                        x => format!("{x:+.1}%"),
                    }),
                format!("{:.1}", r.gpu_hours_paid),
                format!("{:.1}", r.gpu_hours_used),
                format!("{:.0}%", r.idle_share * 100.0),
                duration(r.wait_p50_sec),
                duration(r.wait_p95_sec),
                r.makespan_sec.map_or("-".into(), duration),
                r.interruptions.to_string(),
                format!("{:.1}", r.lost_gpu_hours),
                r.scaling_actions.to_string(),
                r.jobs_unfinished.to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// Seconds as `45s`, `12m`, `3.5h` or `2.1d`.
fn duration(sec: f64) -> String {
    if sec < 120.0 {
        format!("{sec:.0}s")
    } else if sec < 7200.0 {
        format!("{:.0}m", sec / 60.0)
    } else if sec < 172_800.0 {
        format!("{:.1}h", sec / 3600.0)
    } else {
        format!("{:.1}d", sec / 86_400.0)
    }
}
