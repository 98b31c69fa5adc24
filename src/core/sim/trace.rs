//! What happened, as the simulator replays it: job submissions, spot price changes, spot
//! interruptions (explicit, or drawn from a rate with a seed) and capacity errors, each at a
//! moment in epoch milliseconds. Files are parsed into these types outside the core.

use crate::core::catalog::Market;

/// How big a job is: GPUs (packed onto one worker when they fit, else whole workers), or
/// whole nodes (workers) that must all run together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSize {
    Gpus(u32),
    Nodes(u32),
}

/// One job submission.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub id: String,
    pub at_ms: i64,
    pub size: JobSize,
    /// Run time on the pool's first instance type, without interruptions.
    pub duration_ms: i64,
    /// The job saves a checkpoint after every so much work; `None`: it cannot resume and an
    /// interruption loses everything it did.
    pub checkpoint_interval_ms: Option<i64>,
    /// Higher runs first; equal priorities run in submission order.
    pub priority: i32,
}

/// One line of a trace.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    Job(JobSpec),
    /// The spot price of a type (in one zone, or everywhere) from `at_ms` on.
    SpotPrice {
        at_ms: i64,
        instance_type: String,
        zone: Option<String>,
        price: f64,
    },
    /// The cloud warns `count` spot workers (matching type and zone when given, the longest
    /// running first) that it reclaims them after the notice.
    Interruption {
        at_ms: i64,
        instance_type: Option<String>,
        zone: Option<String>,
        count: u32,
    },
    /// From `at_ms` on, each spot worker (of the type, when given) is interrupted at this rate
    /// per instance-hour, drawn from a generator seeded with `seed`.
    InterruptionRate {
        at_ms: i64,
        instance_type: Option<String>,
        rate_per_hour: f64,
        seed: u64,
    },
    /// Launches of the type (in the zone, when given) in the market fail for `duration_ms`.
    CapacityError {
        at_ms: i64,
        instance_type: String,
        zone: Option<String>,
        market: Market,
        duration_ms: i64,
    },
}

impl TraceEvent {
    pub fn at_ms(&self) -> i64 {
        match self {
            Self::Job(j) => j.at_ms,
            Self::SpotPrice { at_ms, .. }
            | Self::Interruption { at_ms, .. }
            | Self::InterruptionRate { at_ms, .. }
            | Self::CapacityError { at_ms, .. } => *at_ms,
        }
    }
}

/// A trace in time order (ties keep their order in the file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    events: Vec<TraceEvent>,
}

impl Trace {
    pub fn new(mut events: Vec<TraceEvent>) -> Self {
        events.sort_by_key(TraceEvent::at_ms);
        Self { events }
    }

    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    pub fn jobs(&self) -> impl Iterator<Item = &JobSpec> {
        self.events.iter().filter_map(|e| match e {
            TraceEvent::Job(j) => Some(j),
            _ => None,
        })
    }

    pub fn first_ms(&self) -> Option<i64> {
        self.events.first().map(TraceEvent::at_ms)
    }

    pub fn last_ms(&self) -> Option<i64> {
        self.events.last().map(TraceEvent::at_ms)
    }
}
