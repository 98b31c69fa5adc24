//! A simulation request as people write it: trace lines (CSV or JSON Lines, or a JSON array),
//! policies in the same shape `PUT /v1/pools/{name}` takes, and settings with defaults.
//! Everything is checked here, and every bad field is named with its place (`trace[3].gpus`,
//! `policies[0].policy.max_workers`), before the core sees any of it.

use serde::Deserialize;
use utoipa::ToSchema;

use crate::core::catalog::{CatalogSnapshot, Market};
use crate::core::cost::day_start;
use crate::core::policy::secs_to_ms;
use crate::core::sim::Candidate;
use crate::core::sim::baseline::BASELINES;
use crate::core::sim::settings::{Billing, Settings, default_end_ms};
use crate::core::sim::trace::{JobSize, JobSpec, Trace, TraceEvent};
use crate::field_error::FieldError;
use crate::policy_in::{PolicyIn, parse_policy};
use crate::timefmt::parse_rfc3339_ms;

/// What a trace line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    Job,
    SpotPrice,
    Interruption,
    InterruptionRate,
    CapacityError,
}

/// One trace line. Which fields apply depends on `kind`; a value in a field that does not
/// apply is an error, so a misplaced column is noticed.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceRow {
    /// RFC 3339.
    #[schema(format = DateTime)]
    pub at: String,
    #[schema(value_type = TraceKind)]
    pub kind: Option<TraceKind>,
    /// job: a name for the job (default `job-<line>`).
    pub id: Option<String>,
    /// job: GPUs it uses (packed onto one worker when they fit, else whole workers).
    pub gpus: Option<u32>,
    /// job: whole workers it runs on, all at once (instead of `gpus`).
    pub nodes: Option<u32>,
    /// job: run time on the pool's first instance type; capacity_error: how long it lasts.
    pub duration_sec: Option<f64>,
    /// job: work between checkpoints; absent means the job cannot resume.
    pub checkpoint_interval_sec: Option<f64>,
    /// job: higher runs first (default 0).
    pub priority: Option<i32>,
    /// spot_price, capacity_error (required); interruption, interruption_rate (optional).
    pub instance_type: Option<String>,
    /// spot_price, interruption, capacity_error: one zone (default every zone).
    pub zone: Option<String>,
    /// capacity_error: the market without capacity (default `spot`).
    pub market: Option<Market>,
    /// spot_price: dollars per hour.
    pub price: Option<f64>,
    /// interruption: how many spot workers get a notice (default 1).
    pub count: Option<u32>,
    /// interruption_rate: interruptions per spot instance-hour.
    pub rate_per_hour: Option<f64>,
    /// interruption_rate: the generator's seed (default 1), for reproducible runs.
    pub seed: Option<u64>,
}

/// Settings of a run; every field has a default.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SettingsIn {
    /// Window start (RFC 3339); default the start of the UTC day of the first trace line.
    #[schema(format = DateTime)]
    pub start: Option<String>,
    /// Window end; default the end of the UTC day by which the last line's longest job is
    /// done.
    #[schema(format = DateTime)]
    pub end: Option<String>,
    /// Seconds between decisions (default 60).
    #[schema(minimum = 1, maximum = 3600)]
    pub tick_sec: Option<u64>,
    /// Seconds from launch until a worker runs jobs (default 120).
    #[schema(maximum = 86400)]
    pub startup_sec: Option<u64>,
    /// Seconds of spot notice before reclaim (default 120).
    #[schema(maximum = 86400)]
    pub notice_sec: Option<u64>,
    /// Seconds a resumed job spends loading its checkpoint (default 300).
    #[schema(maximum = 86400)]
    pub restart_overhead_sec: Option<u64>,
    /// Billing increment in seconds (default: the provider's).
    #[schema(minimum = 1, maximum = 86400)]
    pub billing_increment_sec: Option<u64>,
    /// Minimum billed seconds per instance (default: the provider's).
    #[schema(maximum = 86400)]
    pub billing_minimum_sec: Option<u64>,
}

/// A policy to replay, by name.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NamedPolicy {
    /// 1 to 64 characters after trimming; not a baseline's name when baselines run.
    #[schema(min_length = 1, max_length = 64, pattern = r"\S")]
    pub name: String,
    pub policy: PolicyIn,
}

/// Collects problems so that one answer names them all.
#[derive(Default)]
pub struct Problems(pub Vec<FieldError>);

impl Problems {
    pub fn add(&mut self, field: impl Into<String>, problem: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            problem: problem.into(),
            line: None,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which fields each kind of line may carry.
fn allowed(kind: TraceKind) -> &'static [&'static str] {
    match kind {
        TraceKind::Job => &[
            "id",
            "gpus",
            "nodes",
            "duration_sec",
            "checkpoint_interval_sec",
            "priority",
        ],
        TraceKind::SpotPrice => &["instance_type", "zone", "price"],
        TraceKind::Interruption => &["instance_type", "zone", "count"],
        TraceKind::InterruptionRate => &["instance_type", "rate_per_hour", "seed"],
        TraceKind::CapacityError => &["instance_type", "zone", "market", "duration_sec"],
    }
}

fn present(row: &TraceRow) -> Vec<&'static str> {
    let text = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    [
        ("id", text(&row.id)),
        ("gpus", row.gpus.is_some()),
        ("nodes", row.nodes.is_some()),
        ("duration_sec", row.duration_sec.is_some()),
        (
            "checkpoint_interval_sec",
            row.checkpoint_interval_sec.is_some(),
        ),
        ("priority", row.priority.is_some()),
        ("instance_type", text(&row.instance_type)),
        ("zone", text(&row.zone)),
        ("market", row.market.is_some()),
        ("price", row.price.is_some()),
        ("count", row.count.is_some()),
        ("rate_per_hour", row.rate_per_hour.is_some()),
        ("seed", row.seed.is_some()),
    ]
    .into_iter()
    .filter(|(_, set)| *set)
    .map(|(name, _)| name)
    .collect()
}

fn nonempty(v: &Option<String>) -> Option<String> {
    v.as_ref().filter(|s| !s.trim().is_empty()).cloned()
}

/// The largest job a trace may hold: beyond any real training run.
const MAX_JOB_GPUS: u32 = 1_000_000;
const MAX_JOB_NODES: u32 = 100_000;

/// The longest duration a trace line may give: a year.
const MAX_SPAN_SEC: f64 = 365.0 * 86_400.0;

fn millis(sec: f64) -> i64 {
    (sec * 1000.0).round() as i64
}

/// Checks one line; `at` is its place for error messages (`trace[3]` or `trace.csv line 4`).
pub fn parse_row(
    row: &TraceRow,
    at: &str,
    line: Option<u64>,
    index: usize,
    out: &mut Problems,
) -> Option<TraceEvent> {
    let before = out.0.len();
    let mut fail = |field: &str, problem: String| {
        out.0.push(FieldError {
            field: format!("{at}.{field}"),
            problem,
            line,
        });
    };
    let at_ms = parse_rfc3339_ms(row.at.trim())
        .map_err(|e| fail("at", e))
        .ok();
    let Some(kind) = row.kind else {
        fail(
            "kind",
            "is required: job, spot_price, interruption, interruption_rate or capacity_error"
                .into(),
        );
        return None;
    };
    for f in present(row) {
        if !allowed(kind).contains(&f) {
            fail(
                f,
                format!("does not apply to a `{kind:?}` line").to_lowercase(),
            );
        }
    }
    let positive = |v: Option<f64>| v.filter(|x| (1.0..=MAX_SPAN_SEC).contains(x));
    let event = match kind {
        TraceKind::Job => {
            let size = match (row.gpus, row.nodes) {
                (Some(g), None) if g > 0 && g <= MAX_JOB_GPUS => Some(JobSize::Gpus(g)),
                (None, Some(n)) if n > 0 && n <= MAX_JOB_NODES => Some(JobSize::Nodes(n)),
                (Some(_), Some(_)) => {
                    fail("nodes", "give either gpus or nodes, not both".into());
                    None
                }
                (None, None) => {
                    fail("gpus", "is required (or nodes): at least 1".into());
                    None
                }
                (Some(_), None) => {
                    fail("gpus", format!("must be 1 to {MAX_JOB_GPUS}"));
                    None
                }
                (None, Some(_)) => {
                    fail("nodes", format!("must be 1 to {MAX_JOB_NODES}"));
                    None
                }
            };
            let duration = positive(row.duration_sec);
            if duration.is_none() {
                fail(
                    "duration_sec",
                    format!("is required: at least 1 and at most {MAX_SPAN_SEC} (a year)"),
                );
            }
            let checkpoint = match row.checkpoint_interval_sec {
                None => None,
                Some(c) if (1.0..=MAX_SPAN_SEC).contains(&c) => Some(millis(c)),
                Some(_) => {
                    fail(
                        "checkpoint_interval_sec",
                        "must be at least 1 and at most a year (leave it out for a job that cannot resume)"
                            .into(),
                    );
                    None
                }
            };
            match (at_ms, size, duration) {
                (Some(at_ms), Some(size), Some(d)) => Some(TraceEvent::Job(JobSpec {
                    id: nonempty(&row.id)
                        .unwrap_or_else(|| format!("job-{}", line.unwrap_or(index as u64))),
                    at_ms,
                    size,
                    duration_ms: millis(d),
                    checkpoint_interval_ms: checkpoint,
                    priority: row.priority.unwrap_or(0),
                })),
                _ => None,
            }
        }
        TraceKind::SpotPrice => {
            let it = nonempty(&row.instance_type);
            if it.is_none() {
                fail("instance_type", "is required".into());
            }
            let price = row.price.filter(|p| p.is_finite() && *p >= 0.0);
            if price.is_none() {
                fail("price", "is required: dollars per hour, 0 or more".into());
            }
            match (at_ms, it, price) {
                (Some(at_ms), Some(instance_type), Some(price)) => Some(TraceEvent::SpotPrice {
                    at_ms,
                    instance_type,
                    zone: nonempty(&row.zone),
                    price,
                }),
                _ => None,
            }
        }
        TraceKind::Interruption => {
            let count = row.count.unwrap_or(1);
            if count == 0 {
                fail("count", "must be at least 1".into());
            }
            at_ms.map(|at_ms| TraceEvent::Interruption {
                at_ms,
                instance_type: nonempty(&row.instance_type),
                zone: nonempty(&row.zone),
                count,
            })
        }
        TraceKind::InterruptionRate => {
            let rate = row.rate_per_hour.filter(|r| r.is_finite() && *r >= 0.0);
            if rate.is_none() {
                fail(
                    "rate_per_hour",
                    "is required: interruptions per spot instance-hour, 0 or more".into(),
                );
            }
            match (at_ms, rate) {
                (Some(at_ms), Some(rate_per_hour)) => Some(TraceEvent::InterruptionRate {
                    at_ms,
                    instance_type: nonempty(&row.instance_type),
                    rate_per_hour,
                    seed: row.seed.unwrap_or(1),
                }),
                _ => None,
            }
        }
        TraceKind::CapacityError => {
            let it = nonempty(&row.instance_type);
            if it.is_none() {
                fail("instance_type", "is required".into());
            }
            let duration = positive(row.duration_sec);
            if duration.is_none() {
                fail(
                    "duration_sec",
                    "is required: how long the capacity is missing, at least 1 and at most a year"
                        .into(),
                );
            }
            match (at_ms, it, duration) {
                (Some(at_ms), Some(instance_type), Some(d)) => Some(TraceEvent::CapacityError {
                    at_ms,
                    instance_type,
                    zone: nonempty(&row.zone),
                    market: row.market.unwrap_or(Market::Spot),
                    duration_ms: millis(d),
                }),
                _ => None,
            }
        }
    };
    if out.0.len() > before { None } else { event }
}

/// Checks policies against the catalog, fills their defaults and names them.
pub fn parse_policies(
    policies: Vec<NamedPolicy>,
    catalog: &CatalogSnapshot,
    with_baselines: bool,
    out: &mut Problems,
) -> Vec<Candidate> {
    let mut candidates = Vec::new();
    for (i, p) in policies.into_iter().enumerate() {
        let name = p.name.trim().to_string();
        if name.is_empty() || name.chars().count() > 64 {
            out.add(format!("policies[{i}].name"), "must be 1 to 64 characters");
        }
        if with_baselines && BASELINES.contains(&name.as_str()) {
            out.add(
                format!("policies[{i}].name"),
                format!("`{name}` is the name of a built-in baseline: choose another"),
            );
        }
        if candidates.iter().any(|c: &Candidate| c.name == name) {
            out.add(
                format!("policies[{i}].name"),
                format!("`{name}` is given twice"),
            );
        }
        match parse_policy(p.policy, catalog) {
            Ok(policy) => candidates.push(Candidate { name, policy }),
            Err(e) => prefix_errors(e, &format!("policies[{i}].policy"), out),
        }
    }
    candidates
}

/// Moves a policy's field errors under `prefix`.
pub fn prefix_errors(errors: Vec<FieldError>, prefix: &str, out: &mut Problems) {
    for f in errors {
        out.0.push(FieldError {
            field: format!("{prefix}.{}", f.field),
            ..f
        });
    }
}

/// The window and knobs, defaults filled in from the trace and the first policy.
pub fn parse_settings(s: &SettingsIn, trace: &Trace, out: &mut Problems) -> Option<Settings> {
    let time = |field: &str, v: &Option<String>, out: &mut Problems| {
        v.as_deref().and_then(|t| {
            parse_rfc3339_ms(t)
                .map_err(|e| out.add(format!("settings.{field}"), e))
                .ok()
        })
    };
    let start = time("start", &s.start, out);
    let end = time("end", &s.end, out);
    let (Some(first), Some(last)) = (trace.first_ms(), trace.last_ms()) else {
        out.add("trace", "has no lines: nothing to replay");
        return None;
    };
    let longest = trace.jobs().map(|j| j.duration_ms).max().unwrap_or(0);
    let start = start.unwrap_or_else(|| day_start(first));
    let end = end.unwrap_or_else(|| default_end_ms(last, longest));
    if end <= start {
        out.add("settings.end", "must be after the start");
    }
    let mut settings = Settings::new(start, end);
    if let Some(t) = s.tick_sec {
        if t == 0 || t > 3600 {
            out.add("settings.tick_sec", "must be 1 to 3600");
        }
        settings.tick_ms = secs_to_ms(t.max(1));
    }
    for (field, value, slot) in [
        ("startup_sec", s.startup_sec, &mut settings.startup_ms),
        ("notice_sec", s.notice_sec, &mut settings.notice_ms),
        (
            "restart_overhead_sec",
            s.restart_overhead_sec,
            &mut settings.restart_overhead_ms,
        ),
    ] {
        if let Some(v) = value {
            if v > 86_400 {
                out.add(format!("settings.{field}"), "must be at most 86400");
            }
            *slot = secs_to_ms(v);
        }
    }
    if s.billing_increment_sec.is_some() || s.billing_minimum_sec.is_some() {
        let increment = s.billing_increment_sec.unwrap_or(1);
        if increment > 86_400 || s.billing_minimum_sec.is_some_and(|m| m > 86_400) {
            out.add(
                "settings.billing_minimum_sec",
                "billing settings must be at most 86400",
            );
        }
        if increment == 0 {
            out.add("settings.billing_increment_sec", "must be at least 1");
        }
        settings.billing = Some(Billing {
            increment_ms: secs_to_ms(increment.max(1)),
            minimum_ms: secs_to_ms(s.billing_minimum_sec.unwrap_or(0)),
        });
    }
    out.is_empty().then_some(settings)
}
