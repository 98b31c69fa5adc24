//! The policy as clients send it: every field but the binding and `max_workers` optional, with
//! the documented defaults filled in here, and every bad field named in one 422.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::core::catalog::{CatalogSnapshot, Market};
use crate::core::policy::*;
use crate::field_error::FieldError;

/// An instance type: a name (both markets allowed) or a name with its allowed markets.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum InstanceTypeIn {
    Name(String),
    Choice {
        instance_type: String,
        /// Default: both markets.
        #[schema(min_items = 1)]
        markets: Option<Vec<Market>>,
    },
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ModeName {
    Queue,
    Utilization,
    Elastic,
}

/// A pool's policy. Defaults are given per field. Durations in seconds are at most a week
/// (longer ones are unit mistakes); worker counts at most 100000.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"provider": "aws", "region": "us-east-1", "max_workers": 4,
    "instance_types": ["g4dn.12xlarge", {"instance_type": "g5.12xlarge", "markets": ["spot"]}]}))]
pub struct PolicyIn {
    /// A provider of the catalog (`aws`, `alibaba`, `gcp`, ...), or `static` (the default)
    /// for workers that trainscaler simulates itself, priced from any provider's catalog.
    #[serde(default = "default_provider")]
    #[schema(default = "static", value_type = PoolProvider)]
    pub provider: String,
    pub region: String,
    /// The cloud group holding the pool's instances (AWS auto scaling group name, Alibaba
    /// Cloud scaling group id, or for `gcp` the managed instance group's path,
    /// `projects/P/zones/Z/instanceGroupManagers/NAME` or
    /// `projects/P/regions/R/instanceGroupManagers/NAME`, of its standard MIG); only for
    /// `aws`, `alibaba` and `gcp`. Without it, a cloud pool is decided for but not actuated.
    #[schema(min_length = 1, max_length = 255)]
    pub group: Option<String>,
    /// `gcp` only: the Spot MIG's path (the form of `group`), which takes the decision's spot
    /// share. Required when an instance type allows spot; refused when none does.
    #[schema(min_length = 1, max_length = 255)]
    pub spot_group: Option<String>,
    /// `act` (default: the reconciler changes capacity) or `observe` (it records what it
    /// would change).
    pub actuation: Option<Actuation>,
    /// Zones the pool may launch in; default any zone of the region.
    pub zones: Option<Vec<String>>,
    /// Instance types in priority order, first preferred.
    #[schema(min_items = 1)]
    pub instance_types: Vec<InstanceTypeIn>,
    /// Default: the GPU count of the first instance type in the catalog.
    #[schema(minimum = 1)]
    pub gpus_per_worker: Option<u32>,
    /// `queue` (default), `utilization` or `elastic`.
    pub mode: Option<ModeName>,
    /// Queue mode: GPUs one job uses (default `gpus_per_worker`).
    #[schema(minimum = 1)]
    pub gpus_per_job: Option<u32>,
    /// Utilization mode: target mean GPU utilisation, 0..1 (default 0.7).
    #[schema(exclusive_minimum = 0, maximum = 1)]
    pub target_utilization: Option<f64>,
    /// Utilization mode: ratios within this of 1 change nothing (default 0.1).
    #[schema(minimum = 0, exclusive_maximum = 1)]
    pub tolerance: Option<f64>,
    /// Elastic mode: the job's smallest and largest node counts (required in that mode).
    #[schema(minimum = 1)]
    pub min_nodes: Option<u32>,
    #[schema(minimum = 1)]
    pub max_nodes: Option<u32>,
    /// Elastic mode: nodes are added in whole gangs of this many (default 1).
    #[schema(minimum = 1)]
    pub node_step: Option<u32>,
    /// Default 0.
    #[schema(maximum = 100000)]
    pub min_workers: Option<u32>,
    #[schema(minimum = 1, maximum = 100000)]
    pub max_workers: u32,
    /// One scale-up adds at most this percent of the current capacity (default 50).
    #[schema(exclusive_minimum = 0, maximum = 1000)]
    pub max_step_percent: Option<f64>,
    /// ...but at least this many workers (default 1).
    #[schema(minimum = 1)]
    pub min_step: Option<u32>,
    /// Default 0.
    #[schema(maximum = 604800)]
    pub scale_up_cooldown_sec: Option<u64>,
    /// Default 300.
    #[schema(maximum = 604800)]
    pub scale_down_cooldown_sec: Option<u64>,
    /// Scale-down uses the highest need seen in this window (default 300).
    #[schema(maximum = 604800)]
    pub stabilization_window_sec: Option<u64>,
    /// No work and low utilisation this long → `min_workers` (default 600).
    #[schema(maximum = 604800)]
    pub idle_to_zero_after_sec: Option<u64>,
    /// GPU utilisation below this counts as idle (default 0.1).
    #[schema(minimum = 0, maximum = 1)]
    pub idle_utilization_threshold: Option<f64>,
    /// A worker whose GPUs all hold less memory than this many GiB
    /// (`gpu_memory_used_gib`, DCGM's `DCGM_FI_DEV_FB_USED`) counts as idle even when its
    /// utilisation blips; unset (the default), memory is not an idle signal.
    #[schema(exclusive_minimum = 0, maximum = 10000)]
    pub idle_gpu_memory_gib: Option<f64>,
    /// On-demand workers before any spot (default 0).
    #[schema(maximum = 100000)]
    pub on_demand_base: Option<u32>,
    /// Percent spot above the base (default 80); on-demand is rounded up.
    #[schema(maximum = 100)]
    pub spot_percentage: Option<u32>,
    /// US dollars per UTC day.
    #[schema(exclusive_minimum = 0, maximum = 1e9)]
    pub daily_budget: Option<f64>,
    /// `alarm` (default) or `cap`.
    pub budget_action: Option<BudgetAction>,
    /// Signals older than this are ignored (default 300).
    #[schema(maximum = 604800)]
    pub signal_max_age_sec: Option<u64>,
    /// Skip an instance type (in a zone) this long after a capacity error (default 180).
    #[schema(maximum = 604800)]
    pub capacity_error_backoff_sec: Option<u64>,
    /// Window for the pool's interruption rate (default 3600).
    #[schema(maximum = 604800)]
    pub interruption_window_sec: Option<u64>,
    /// Interruptions per spot worker in the window above which replacements go on-demand
    /// (default 0.2).
    #[schema(minimum = 0)]
    pub max_interruption_rate: Option<f64>,
}

/// A pool's provider: one of the catalog, or `static` for workers trainscaler simulates.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // never built: it exists for its schema
pub enum PoolProvider {
    Static,
    Aws,
    Gcp,
    Azure,
    Lambda,
    Nebius,
    Vast,
    Alibaba,
}

fn default_provider() -> String {
    STATIC_PROVIDER.to_string()
}

/// Providers with an adapter that drives cloud groups.
const CLOUD_GROUP_PROVIDERS: [&str; 3] = ["aws", "alibaba", "gcp"];

/// A week: longer cooldowns or windows are unit mistakes (milliseconds sent as seconds).
const MAX_SECONDS: u64 = 7 * 24 * 3600;
const MAX_WORKERS: u32 = 100_000;

struct Checks(Vec<FieldError>);

impl Checks {
    fn fail(&mut self, field: impl Into<String>, problem: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            problem: problem.into(),
            line: None,
        });
    }

    fn seconds(&mut self, field: &str, v: Option<u64>, default: u64) -> u64 {
        let v = v.unwrap_or(default);
        if v > MAX_SECONDS {
            self.fail(
                field,
                format!("must be at most {MAX_SECONDS} seconds (a week)"),
            );
        }
        v
    }

    fn fraction(&mut self, field: &str, v: Option<f64>, default: f64, zero_ok: bool) -> f64 {
        let v = v.unwrap_or(default);
        if !v.is_finite() || !(0.0..=1.0).contains(&v) || (!zero_ok && v == 0.0) {
            let range = if zero_ok { "[0, 1]" } else { "(0, 1]" };
            self.fail(field, format!("must be a fraction in {range}, not {v}"));
        }
        v
    }

    fn only_in(&mut self, field: &str, given: bool, mode: &str) {
        if given {
            self.fail(field, format!("only applies to mode `{mode}`"));
        }
    }
}

/// Checks `p` against the catalog and fills in defaults. Each step below checks one group of
/// fields and records what is wrong in `Checks`, so one 422 names every bad field, in the
/// order the steps run.
pub fn parse_policy(p: PolicyIn, catalog: &CatalogSnapshot) -> Result<Policy, Vec<FieldError>> {
    check_provider(&p, catalog)?;
    let mut c = Checks(Vec::new());
    let (instance_types, first_gpus) = instance_choices(&mut c, &p, catalog);
    let mut zones = checked_zones(&mut c, &p);
    let gpus_per_worker = gpus_per_worker(&mut c, p.gpus_per_worker, first_gpus);
    let mode = mode(&mut c, &p, gpus_per_worker);
    let min_workers = worker_bounds(&mut c, &p);
    let (max_step_percent, min_step) = step_limits(&mut c, &p);
    let (on_demand_base, spot_percentage) = market_mix(&mut c, &p);
    check_budget_and_idle_memory(&mut c, &p);
    let max_interruption_rate = max_interruption_rate(&mut c, &p);
    check_group(&mut c, &p);
    gcp_groups(&mut c, &p, &instance_types, &mut zones);
    let policy = Policy {
        scale_up_cooldown_sec: c.seconds(
            "scale_up_cooldown_sec",
            p.scale_up_cooldown_sec,
            DEFAULT_SCALE_UP_COOLDOWN_SEC,
        ),
        scale_down_cooldown_sec: c.seconds(
            "scale_down_cooldown_sec",
            p.scale_down_cooldown_sec,
            DEFAULT_SCALE_DOWN_COOLDOWN_SEC,
        ),
        stabilization_window_sec: c.seconds(
            "stabilization_window_sec",
            p.stabilization_window_sec,
            DEFAULT_STABILIZATION_WINDOW_SEC,
        ),
        idle_to_zero_after_sec: c.seconds(
            "idle_to_zero_after_sec",
            p.idle_to_zero_after_sec,
            DEFAULT_IDLE_TO_ZERO_AFTER_SEC,
        ),
        idle_utilization_threshold: c.fraction(
            "idle_utilization_threshold",
            p.idle_utilization_threshold,
            DEFAULT_IDLE_UTILIZATION_THRESHOLD,
            true,
        ),
        signal_max_age_sec: c.seconds(
            "signal_max_age_sec",
            p.signal_max_age_sec,
            DEFAULT_SIGNAL_MAX_AGE_SEC,
        ),
        capacity_error_backoff_sec: c.seconds(
            "capacity_error_backoff_sec",
            p.capacity_error_backoff_sec,
            DEFAULT_CAPACITY_ERROR_BACKOFF_SEC,
        ),
        interruption_window_sec: c.seconds(
            "interruption_window_sec",
            p.interruption_window_sec,
            DEFAULT_INTERRUPTION_WINDOW_SEC,
        ),
        actuation: p.actuation.unwrap_or_default(),
        idle_gpu_memory_gib: p.idle_gpu_memory_gib,
        daily_budget: p.daily_budget,
        budget_action: p.budget_action.unwrap_or_default(),
        max_workers: p.max_workers,
        provider: p.provider,
        region: p.region,
        group: p.group,
        spot_group: p.spot_group,
        zones,
        instance_types,
        gpus_per_worker,
        mode,
        min_workers,
        max_step_percent,
        min_step,
        on_demand_base,
        spot_percentage,
        max_interruption_rate,
    };
    if c.0.is_empty() { Ok(policy) } else { Err(c.0) }
}

/// An unknown provider makes every other check meaningless, so it is refused alone.
fn check_provider(p: &PolicyIn, catalog: &CatalogSnapshot) -> Result<(), Vec<FieldError>> {
    if p.provider != STATIC_PROVIDER && !catalog.has_provider(&p.provider) {
        let mut c = Checks(Vec::new());
        c.fail(
            "provider",
            format!("is not a provider of the catalog: `{}`", p.provider),
        );
        return Err(c.0);
    }
    Ok(())
}

/// The instance types with their allowed markets, each offered by the provider in the
/// region and listed once; also the first type's GPU count, the default `gpus_per_worker`.
fn instance_choices(
    c: &mut Checks,
    p: &PolicyIn,
    catalog: &CatalogSnapshot,
) -> (Vec<InstanceChoice>, Option<f64>) {
    if p.instance_types.is_empty() {
        c.fail("instance_types", "must name at least one instance type");
    }
    let mut instance_types = Vec::new();
    let mut first_gpus = None;
    for (i, t) in p.instance_types.iter().enumerate() {
        let (name, markets) = match t {
            InstanceTypeIn::Name(n) => (n.clone(), vec![Market::Spot, Market::OnDemand]),
            InstanceTypeIn::Choice {
                instance_type,
                markets,
            } => (
                instance_type.clone(),
                markets
                    .clone()
                    .unwrap_or_else(|| vec![Market::Spot, Market::OnDemand]),
            ),
        };
        let offered: Vec<_> = catalog
            .offerings_for_pool(&p.provider, &name)
            .filter(|o| o.key.region == p.region)
            .collect();
        if offered.is_empty() {
            let anywhere = catalog
                .offerings_for_pool(&p.provider, &name)
                .next()
                .is_some();
            let problem = if anywhere {
                format!(
                    "`{name}` is not offered by {} in region `{}`",
                    p.provider, p.region
                )
            } else {
                format!("`{name}` is not an instance type of {}", p.provider)
            };
            c.fail(format!("instance_types[{i}].instance_type"), problem);
        } else if i == 0 {
            first_gpus = Some(offered[0].spec.gpu_count);
        }
        if markets.is_empty() {
            c.fail(
                format!("instance_types[{i}].markets"),
                "must allow at least one market",
            );
        }
        if instance_types
            .iter()
            .any(|x: &InstanceChoice| x.instance_type == name)
        {
            c.fail(
                format!("instance_types[{i}].instance_type"),
                format!("`{name}` is listed twice"),
            );
        }
        instance_types.push(InstanceChoice {
            instance_type: name,
            markets,
        });
    }
    (instance_types, first_gpus)
}

fn checked_zones(c: &mut Checks, p: &PolicyIn) -> Vec<String> {
    let zones = p.zones.clone().unwrap_or_default();
    for (i, z) in zones.iter().enumerate() {
        if z.trim().is_empty() {
            c.fail(format!("zones[{i}]"), "must not be empty");
        } else if zones[..i].contains(z) {
            c.fail(format!("zones[{i}]"), format!("`{z}` is listed twice"));
        }
    }
    zones
}

/// The given count, or the first instance type's whole GPU count.
fn gpus_per_worker(c: &mut Checks, given: Option<u32>, first_gpus: Option<f64>) -> u32 {
    match (given, first_gpus) {
        (Some(0), _) => {
            c.fail("gpus_per_worker", "must be at least 1");
            1
        }
        (Some(n), _) => n,
        (None, Some(g)) if g >= 1.0 => g.round() as u32,
        (None, Some(_)) => {
            c.fail(
                "gpus_per_worker",
                "is required: the first instance type has a fractional GPU",
            );
            1
        }
        (None, None) => 1,
    }
}

/// The scaling mode with its own fields; fields of another mode are refused rather than
/// silently ignored.
fn mode(c: &mut Checks, p: &PolicyIn, gpus_per_worker: u32) -> Mode {
    let mode_name = p.mode.unwrap_or(ModeName::Queue);
    refuse_other_modes_fields(c, p, mode_name);
    match mode_name {
        ModeName::Queue => {
            let gpus_per_job = p.gpus_per_job.unwrap_or(gpus_per_worker);
            if gpus_per_job == 0 {
                c.fail("gpus_per_job", "must be at least 1");
            }
            Mode::Queue { gpus_per_job }
        }
        ModeName::Utilization => utilization_mode(c, p),
        ModeName::Elastic => elastic_mode(c, p),
    }
}

fn refuse_other_modes_fields(c: &mut Checks, p: &PolicyIn, mode_name: ModeName) {
    c.only_in(
        "gpus_per_job",
        p.gpus_per_job.is_some() && mode_name != ModeName::Queue,
        "queue",
    );
    let not_utilization = mode_name != ModeName::Utilization;
    c.only_in(
        "target_utilization",
        p.target_utilization.is_some() && not_utilization,
        "utilization",
    );
    c.only_in(
        "tolerance",
        p.tolerance.is_some() && not_utilization,
        "utilization",
    );
    let not_elastic = mode_name != ModeName::Elastic;
    c.only_in("min_nodes", p.min_nodes.is_some() && not_elastic, "elastic");
    c.only_in("max_nodes", p.max_nodes.is_some() && not_elastic, "elastic");
    c.only_in("node_step", p.node_step.is_some() && not_elastic, "elastic");
}

fn utilization_mode(c: &mut Checks, p: &PolicyIn) -> Mode {
    Mode::Utilization {
        target_utilization: c.fraction(
            "target_utilization",
            p.target_utilization,
            DEFAULT_TARGET_UTILIZATION,
            false,
        ),
        tolerance: {
            let t = c.fraction("tolerance", p.tolerance, DEFAULT_TOLERANCE, true);
            if t >= 1.0 {
                c.fail("tolerance", "must be below 1");
            }
            t
        },
    }
}

/// Elastic mode: both node bounds are required, and the smallest gang must fit the pool.
fn elastic_mode(c: &mut Checks, p: &PolicyIn) -> Mode {
    let (min_nodes, max_nodes) = match (p.min_nodes, p.max_nodes) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => {
            for (field, missing) in [("min_nodes", a.is_none()), ("max_nodes", b.is_none())] {
                if missing {
                    c.fail(field, "is required in mode `elastic`");
                }
            }
            (1, 1)
        }
    };
    if min_nodes > p.max_workers {
        c.fail(
            "min_nodes",
            format!(
                "the gang of {min_nodes} does not fit in max_workers ({})",
                p.max_workers
            ),
        );
    }
    if min_nodes == 0 {
        c.fail("min_nodes", "must be at least 1");
    }
    if max_nodes < min_nodes {
        c.fail(
            "max_nodes",
            format!("must not be below min_nodes ({min_nodes})"),
        );
    }
    let node_step = p.node_step.unwrap_or(1);
    if node_step == 0 {
        c.fail("node_step", "must be at least 1");
    }
    Mode::Elastic {
        min_nodes,
        max_nodes,
        node_step,
    }
}

/// `max_workers` in range and `min_workers` (default 0) not above it.
fn worker_bounds(c: &mut Checks, p: &PolicyIn) -> u32 {
    let min_workers = p.min_workers.unwrap_or(0);
    if p.max_workers == 0 {
        c.fail("max_workers", "must be at least 1");
    }
    if p.max_workers > MAX_WORKERS {
        c.fail("max_workers", format!("must be at most {MAX_WORKERS}"));
    }
    if min_workers > p.max_workers {
        c.fail(
            "min_workers",
            format!("must not exceed max_workers ({})", p.max_workers),
        );
    }
    min_workers
}

fn step_limits(c: &mut Checks, p: &PolicyIn) -> (f64, u32) {
    let max_step_percent = p.max_step_percent.unwrap_or(DEFAULT_MAX_STEP_PERCENT);
    if !(max_step_percent.is_finite() && max_step_percent > 0.0 && max_step_percent <= 1000.0) {
        c.fail("max_step_percent", "must be a percentage in (0, 1000]");
    }
    let min_step = p.min_step.unwrap_or(DEFAULT_MIN_STEP);
    if min_step == 0 {
        c.fail("min_step", "must be at least 1");
    }
    (max_step_percent, min_step)
}

/// The on-demand base and the spot share above it.
fn market_mix(c: &mut Checks, p: &PolicyIn) -> (u32, u32) {
    let spot_percentage = p.spot_percentage.unwrap_or(DEFAULT_SPOT_PERCENTAGE);
    if spot_percentage > 100 {
        c.fail("spot_percentage", "must be a percentage from 0 to 100");
    }
    let on_demand_base = p.on_demand_base.unwrap_or(0);
    if on_demand_base > MAX_WORKERS {
        c.fail("on_demand_base", format!("must be at most {MAX_WORKERS}"));
    }
    (on_demand_base, spot_percentage)
}

fn check_budget_and_idle_memory(c: &mut Checks, p: &PolicyIn) {
    if let Some(b) = p.daily_budget
        && !(b.is_finite() && b > 0.0 && b <= 1e9)
    {
        c.fail(
            "daily_budget",
            "must be a number of dollars greater than zero",
        );
    }
    if let Some(g) = p.idle_gpu_memory_gib
        && (!g.is_finite() || g <= 0.0 || g > 10_000.0)
    {
        c.fail(
            "idle_gpu_memory_gib",
            format!("must be more than 0 and at most 10000 GiB, not {g}"),
        );
    }
    if p.budget_action.is_some() && p.daily_budget.is_none() {
        c.fail("budget_action", "needs a daily_budget");
    }
}

fn max_interruption_rate(c: &mut Checks, p: &PolicyIn) -> f64 {
    let rate = p
        .max_interruption_rate
        .unwrap_or(DEFAULT_MAX_INTERRUPTION_RATE);
    if !(rate.is_finite() && rate >= 0.0) {
        c.fail("max_interruption_rate", "must be a number at least zero");
    }
    rate
}

/// Only cloud pools bind to a group, named by 1 to 255 printable characters.
fn check_group(c: &mut Checks, p: &PolicyIn) {
    let Some(g) = &p.group else { return };
    if !CLOUD_GROUP_PROVIDERS.contains(&p.provider.as_str()) {
        c.fail(
            "group",
            format!(
                "only pools of {} bind to a cloud group, not `{}`",
                CLOUD_GROUP_PROVIDERS.join(" or "),
                p.provider
            ),
        );
    } else if g.trim().is_empty() || g.chars().count() > 255 || g.chars().any(char::is_control) {
        c.fail(
            "group",
            "must be a group name or id of 1 to 255 printable characters",
        );
    }
}

/// A GCP pool's MIGs: paths of the documented form in the pool's region, a Spot MIG exactly
/// when an instance type allows spot (a MIG runs one provisioning model), and zonal MIGs in
/// the pool's zones. Zonal MIGs' zones become the pool's zones when it lists none, so a
/// capacity error in that zone takes the type out of the decision.
fn gcp_groups(c: &mut Checks, p: &PolicyIn, types: &[InstanceChoice], zones: &mut Vec<String>) {
    use crate::provider::gcp::MigPath;
    if p.provider != crate::provider::GCP {
        if p.spot_group.is_some() {
            c.fail("spot_group", "only gcp pools name a Spot MIG");
        }
        return;
    }
    let any_spot = types.iter().any(|t| t.allows(Market::Spot));
    let Some(group) = &p.group else {
        if p.spot_group.is_some() {
            c.fail("spot_group", "needs `group`, the pool's standard MIG");
        }
        return;
    };
    let zones_given = p.zones.as_ref().is_some_and(|z| !z.is_empty());
    let mut check = |c: &mut Checks, field: &str, path: &str| -> Option<MigPath> {
        let mig = match MigPath::parse(path) {
            Ok(m) => m,
            Err(e) => {
                c.fail(field, e);
                return None;
            }
        };
        if mig.region() != p.region {
            c.fail(
                field,
                format!(
                    "is in region `{}`, not the pool's region `{}`",
                    mig.region(),
                    p.region
                ),
            );
        } else if let Some(z) = mig.zone() {
            if zones_given && !zones.iter().any(|x| x == z) {
                c.fail(
                    field,
                    format!("is in zone `{z}`, which `zones` does not list"),
                );
            } else if !zones.iter().any(|x| x == z) {
                zones.push(z.to_string());
            }
        }
        Some(mig)
    };
    let standard = check(c, "group", group);
    match &p.spot_group {
        Some(spot) => {
            let spot_mig = check(c, "spot_group", spot);
            if standard.is_some() && standard == spot_mig {
                c.fail("spot_group", "must be another MIG than `group`");
            }
            if !any_spot {
                c.fail(
                    "spot_group",
                    "names a Spot MIG, but no instance type allows the spot market",
                );
            }
        }
        None if any_spot => c.fail(
            "spot_group",
            "is required: an instance type allows spot, and a MIG runs one provisioning \
             model; name the Spot MIG, or allow only [\"on_demand\"] in instance_types",
        ),
        None => {}
    }
}
