//! Simulation input from disk: a trace file (CSV with a header, or JSON Lines), policy files
//! (the JSON body `PUT /v1/pools/{name}` takes; the name is the file's stem), and scenario
//! folders holding a trace, an optional `scenario.json` of settings, and policy files.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::input::{NamedPolicy, Problems, SettingsIn, TraceRow, parse_row};
use crate::core::sim::trace::Trace;
use crate::field_error::FieldError;

/// The file holding a scenario's settings; every other `.json` file in the folder is a policy.
pub const SCENARIO_SETTINGS: &str = "scenario.json";

/// A scenario folder's contents.
pub struct Scenario {
    pub trace: PathBuf,
    pub policies: Vec<PathBuf>,
    pub settings: SettingsIn,
}

/// Reads a trace: JSON Lines for `.jsonl`/`.ndjson`, CSV with a header otherwise. Every bad
/// line is reported, with its line number.
pub fn read_trace(path: &Path) -> anyhow::Result<Trace> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the trace {}", path.display()))?;
    let name = path.display().to_string();
    let jsonl = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("jsonl" | "ndjson")
    );
    let mut problems = Problems::default();
    let mut events = Vec::new();
    // Rows that do not even read are named by the field serde stopped at, when it knows one.
    let mut keep =
        |row: Result<TraceRow, (String, String)>, line: u64, problems: &mut Problems| match row {
            Ok(row) => {
                if let Some(e) = parse_row(&row, "trace", Some(line), 0, problems) {
                    events.push(e);
                }
            }
            Err((field, problem)) => problems.0.push(FieldError {
                field,
                problem,
                line: Some(line),
            }),
        };
    if jsonl {
        for (i, l) in text.lines().enumerate() {
            if l.trim().is_empty() || l.trim_start().starts_with('#') {
                continue;
            }
            let row = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(l))
                .map_err(|e| {
                    let path = e.path().to_string();
                    let field = if path == "." {
                        "trace".to_string()
                    } else {
                        format!("trace.{path}")
                    };
                    (field, e.inner().to_string())
                });
            keep(row, i as u64 + 1, &mut problems);
        }
    } else {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .context("the trace has no CSV header")?
            .clone();
        for record in reader.records() {
            match record {
                Ok(r) => {
                    let line = r.position().map_or(0, |p| p.line());
                    keep(
                        r.deserialize(Some(&headers))
                            .map_err(|e| ("trace".to_string(), e.to_string())),
                        line,
                        &mut problems,
                    );
                }
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    keep(
                        Err(("trace".to_string(), e.to_string())),
                        line,
                        &mut problems,
                    );
                }
            }
        }
    }
    if !problems.is_empty() {
        bail!("{}", describe(&name, &problems));
    }
    Ok(Trace::new(events))
}

/// Problems as lines for a terminal: `file line 4: trace.gpus must be at least 1`.
pub fn describe(name: &str, problems: &Problems) -> String {
    let mut out = format!("{name}: {} problem(s)", problems.0.len());
    for p in problems.0.iter().take(50) {
        let place = p.line.map(|l| format!(" line {l}")).unwrap_or_default();
        out.push_str(&format!("\n  {name}{place}: {} {}", p.field, p.problem));
    }
    out
}

/// Reads a JSON file, naming the path of a field that does not read.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize(&mut de)
        .map_err(|e| anyhow::anyhow!("{}: `{}` {}", path.display(), e.path(), e.inner()))
}

/// Reads a policy file; its name is the file stem.
pub fn read_policy(path: &Path) -> anyhow::Result<NamedPolicy> {
    let policy = read_json(path, "policy")?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("policy")
        .to_string();
    Ok(NamedPolicy { name, policy })
}

/// Reads settings in the shape of a scenario's `scenario.json`.
pub fn read_settings(path: &Path) -> anyhow::Result<SettingsIn> {
    read_json(path, "settings")
}

/// Finds a scenario folder's trace, settings and policies (policies sorted by file name).
pub fn read_scenario(dir: &Path) -> anyhow::Result<Scenario> {
    let mut traces = Vec::new();
    let mut policies = Vec::new();
    let mut settings = SettingsIn::default();
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the scenario folder {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if file == SCENARIO_SETTINGS {
            settings = read_settings(&path)?;
        } else if file.starts_with("trace.") && matches!(ext, "csv" | "jsonl" | "ndjson") {
            traces.push(path);
        } else if ext == "json" {
            policies.push(path);
        }
    }
    policies.sort();
    let trace = match traces.len() {
        1 => traces.remove(0),
        0 => bail!(
            "{} has no trace: put the trace in trace.csv or trace.jsonl",
            dir.display()
        ),
        _ => bail!(
            "{} has more than one trace file: keep one of trace.csv and trace.jsonl",
            dir.display()
        ),
    };
    Ok(Scenario {
        trace,
        policies,
        settings,
    })
}
