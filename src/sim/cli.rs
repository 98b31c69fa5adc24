//! `trainscaler simulate`: a trace and policy files (or a scenario folder) in; a table, JSON
//! or an SVG chart out. Prices come from the bundled catalog, so it runs anywhere without a
//! database.

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::files::{describe, read_policy, read_scenario, read_settings, read_trace};
use super::input::{Problems, SettingsIn};
use super::{Plan, assumptions, chart, table};

/// The chart's size in pixels: three panels readable on a laptop screen.
const CHART_WIDTH: u32 = 1200;
const CHART_HEIGHT: u32 = 900;
use crate::catalog::bundled::bundled_snapshot;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// Flags of `trainscaler simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The trace: CSV with a header, or JSON Lines (`.jsonl`).
    #[arg(
        long,
        required_unless_present = "scenario",
        conflicts_with = "scenario"
    )]
    pub trace: Option<PathBuf>,
    /// A policy file (the JSON `PUT /v1/pools/{name}` takes); repeat for more. Its name is the
    /// file's stem.
    #[arg(long = "policy", conflicts_with = "scenario")]
    pub policies: Vec<PathBuf>,
    /// A scenario folder: trace.csv or trace.jsonl, optional scenario.json settings, and
    /// every other .json file as a policy.
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Settings (the shape of a scenario's scenario.json) for a --trace run.
    #[arg(long, conflicts_with = "scenario")]
    pub settings: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Also write an SVG chart of workers, queue and cumulative cost over time.
    #[arg(long)]
    pub chart: Option<PathBuf>,
    /// Leave out the built-in baselines.
    #[arg(long)]
    pub no_baselines: bool,
}

/// Runs the command, printing to stdout.
pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let (trace_path, policy_paths, settings) = match &args.scenario {
        Some(dir) => {
            let s = read_scenario(dir)?;
            (s.trace, s.policies, s.settings)
        }
        None => {
            let settings = match &args.settings {
                Some(p) => read_settings(p)?,
                None => SettingsIn::default(),
            };
            let trace = args
                .trace
                .clone()
                .context("--trace or --scenario is required")?;
            (trace, args.policies.clone(), settings)
        }
    };
    if policy_paths.is_empty() {
        bail!(
            "no policy to replay: give --policy FILE, or put policy .json files in the scenario folder"
        );
    }
    let trace = read_trace(&trace_path)?;
    let policies = policy_paths
        .iter()
        .map(|p| read_policy(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let catalog = bundled_snapshot();
    let mut problems = Problems::default();
    let Some(plan) = Plan::new(
        trace,
        policies,
        &settings,
        !args.no_baselines,
        &catalog,
        &mut problems,
    ) else {
        bail!("{}", describe("simulate", &problems));
    };
    let (response, runs) = plan.run(&catalog, "the catalog bundled into this binary");
    match args.format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&response)?),
        OutputFormat::Table => {
            println!(
                "{} to {}, a decision every {}s",
                response.start, response.end, response.tick_sec
            );
            print!("{}", table::render(&response.policies));
            print!("{}", assumptions::render(&response.assumptions));
        }
    }
    if let Some(path) = &args.chart {
        let series: Vec<_> = runs
            .iter()
            .map(|r| (r.report.name.as_str(), &r.timeline))
            .collect();
        let svg = chart::render_svg(&series, CHART_WIDTH, CHART_HEIGHT)?;
        std::fs::write(path, svg)
            .with_context(|| format!("cannot write the chart {}", path.display()))?;
        eprintln!("chart written to {}", path.display());
    }
    Ok(())
}
