//! One policy replayed against a trace on a virtual clock: every `tick` the pool is evaluated
//! by the same `scale::evaluate` the service runs, and its actions are carried out on
//! simulated workers. Between ticks, events happen at their own moments: jobs arrive, start
//! and finish, workers become ready, spot notices come and instances are reclaimed.
//!
//! What is modelled: instance start-up time, per-second billing with the provider's minimum,
//! spot prices that change, the spot notice (the decision's checkpoint action saves the job's
//! work if the job checkpoints), work lost since the last checkpoint, the restart overhead of
//! a resumed job, and launches refused for lack of capacity (recorded as incidents the next
//! decision avoids). Jobs are placed greedily in priority order onto ready workers.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use super::report::{CostByMarket, PolicyReport, PolicyRun, Timeline, percentile};
use super::settings::{Billing, Settings};
use super::trace::{JobSize, JobSpec, Trace, TraceEvent};
use crate::core::catalog::Market;
use crate::core::cost::{PriceBook, day_start};
use crate::core::policy::{Mode, Policy};
use crate::core::scale::{
    Action, DecisionEvent, Incident, IncidentKind, PoolInput, PoolState, Signals, Warning,
    WarningKind, Worker, evaluate, market_split,
};

const HOUR_MS: f64 = 3_600_000.0;
/// Queued jobs that do not fit looked past before placement gives up until the next event,
/// as a batch scheduler's backfill bounds how deep it looks.
pub const BACKFILL_DEPTH: usize = 256;

/// How much longer a job runs on each instance type than on the pool's first one (1.0 when
/// not listed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeedTable(pub Vec<(String, f64)>);

impl SpeedTable {
    fn factor(&self, instance_type: &str) -> f64 {
        self.0
            .iter()
            .find(|(t, _)| t == instance_type)
            .map_or(1.0, |(_, f)| *f)
            .max(1e-6)
    }
}

/// Everything one replay reads.
pub struct Replay<'a> {
    pub name: &'a str,
    pub policy: &'a Policy,
    pub prices: &'a PriceBook,
    pub trace: &'a Trace,
    pub settings: &'a Settings,
    pub speed: &'a SpeedTable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Ready(u64),
    Done(usize, u32),
    Reclaim(u64),
    /// (worker, rate source, the source's generation when drawn)
    RateInterrupt(u64, usize, u32),
}

/// What the simulator knows about a worker beyond what the decision sees.
struct Meta {
    num: u64,
    ready: bool,
    gpus_free: u32,
    jobs: Vec<usize>,
    launched_at: i64,
    price: f64,
    settled_at: i64,
    cost: f64,
    /// Its jobs saved a checkpoint on the spot notice.
    saved_on_notice: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum JobState {
    Waiting,
    Running,
    Done,
}

struct SimJob {
    spec: JobSpec,
    gpus: u32,
    /// Whole workers it needs, or `None` when it fits on part of one.
    whole_workers: Option<u32>,
    state: JobState,
    workers: Vec<u64>,
    seg_start: i64,
    productive_from: i64,
    rate: f64,
    work_done: i64,
    checkpointed: i64,
    first_start: Option<i64>,
    finished_at: Option<i64>,
    epoch: u32,
    restarts: u32,
}

impl SimJob {
    /// GPUs the job holds on each of its workers: all of them when it spans workers.
    fn gpus_per_worker(&self, gpw: u32) -> u32 {
        match self.whole_workers {
            None => self.gpus,
            Some(_) => gpw,
        }
    }

    fn work_at(&self, t: i64) -> i64 {
        let ran = (t - self.productive_from).max(0) as f64 * self.rate;
        (self.work_done + ran as i64).min(self.spec.duration_ms)
    }

    /// Work saved by `t`: the periodic checkpoints plus any saved on a notice.
    fn saved_at(&self, t: i64) -> i64 {
        match self.spec.checkpoint_interval_ms {
            Some(i) if i > 0 => {
                let w = self.work_at(t);
                (w / i * i).max(self.checkpointed).min(w)
            }
            _ => 0,
        }
    }
}

struct CapacityGap {
    instance_type: String,
    zone: Option<String>,
    market: Market,
    from: i64,
    until: i64,
}

struct InterruptionDraws {
    instance_type: Option<String>,
    rate_per_hour: f64,
    rng: Pcg64,
    generation: u32,
}

struct Sim<'a> {
    r: &'a Replay<'a>,
    billing: Billing,
    gpw: u32,
    prices: PriceBook,
    workers: Vec<Worker>,
    meta: Vec<Meta>,
    jobs: Vec<SimJob>,
    /// Waiting job indices, in the order they are placed.
    queue: VecDeque<usize>,
    heap: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    seq: u64,
    next_num: u64,
    gaps: Vec<CapacityGap>,
    rates: Vec<InterruptionDraws>,
    incidents: Vec<Incident>,
    state: PoolState,
    /// Since when nothing has run or waited; `None` while something does.
    idle_since: Option<i64>,
    running: u32,
    /// GPUs of the running and the waiting jobs: the queue as a scheduler reports it.
    running_gpus: u64,
    waiting_gpus: u64,
    // Tallies.
    cost: CostByMarket,
    paid_gpu_ms: f64,
    used_gpu_ms: f64,
    lost_gpu_ms: f64,
    interruptions: u32,
    scaling_actions: u32,
    launches: u32,
    capacity_errors: u32,
    budget_alarms: u32,
    evaluations: u64,
}

/// Replays the trace under one policy.
pub fn replay(r: &Replay<'_>) -> PolicyRun {
    let s = r.settings;
    let mut sim = Sim {
        r,
        billing: s
            .billing
            .unwrap_or_else(|| Billing::for_provider(&r.policy.provider)),
        gpw: r.policy.gpus_per_worker.max(1),
        prices: r.prices.clone(),
        workers: Vec::new(),
        meta: Vec::new(),
        jobs: Vec::new(),
        queue: VecDeque::new(),
        heap: BinaryHeap::new(),
        seq: 0,
        next_num: 0,
        gaps: Vec::new(),
        rates: Vec::new(),
        incidents: Vec::new(),
        state: PoolState::default(),
        idle_since: None,
        running: 0,
        running_gpus: 0,
        waiting_gpus: 0,
        cost: CostByMarket::default(),
        paid_gpu_ms: 0.0,
        used_gpu_ms: 0.0,
        lost_gpu_ms: 0.0,
        interruptions: 0,
        scaling_actions: 0,
        launches: 0,
        capacity_errors: 0,
        budget_alarms: 0,
        evaluations: 0,
    };
    sim.prewarm(s.start_ms);
    let ticks = s.ticks();
    let per_point = ticks.div_ceil(s.timeline_points.max(1) as u64).max(1);
    let mut timeline = Timeline::default();
    let (mut peak_workers, mut peak_queue) = (0u32, 0u32);
    let mut next_trace = 0;
    let mut day = day_start(s.start_ms);
    for i in 0..ticks {
        let t = s.start_ms + i as i64 * s.tick_ms.max(1);
        next_trace = sim.advance_to(t, next_trace);
        if r.policy.daily_budget.is_some() && day_start(t) != day {
            day = day_start(t);
            sim.forget_stopped();
        }
        sim.decide(t);
        peak_workers = peak_workers.max(sim.live_count());
        peak_queue = peak_queue.max(sim.queue.len() as u32);
        if (i + 1) % per_point == 0 || i + 1 == ticks {
            timeline.at_ms.push(t);
            timeline.workers.push(peak_workers);
            timeline.queued.push(peak_queue);
            timeline.cost.push(sim.spent_by(t));
            (peak_workers, peak_queue) = (0, 0);
        }
    }
    sim.advance_to(s.end_ms, next_trace);
    let report = sim.finish(s.end_ms);
    PolicyRun { report, timeline }
}

impl Sim<'_> {
    fn push(&mut self, at: i64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn live_count(&self) -> u32 {
        self.workers
            .iter()
            .filter(|w| w.stopped_at_ms.is_none())
            .count() as u32
    }

    fn index_of(&self, num: u64) -> Option<usize> {
        self.meta.iter().position(|m| m.num == num)
    }

    /// A pool with a floor was running before the window: its minimum is there, ready.
    fn prewarm(&mut self, t: i64) {
        let p = self.r.policy;
        if p.min_workers == 0 {
            return;
        }
        let (od, spot) = market_split(p, p.min_workers);
        for (market, n) in [(Market::OnDemand, od), (Market::Spot, spot)] {
            let Some(choice) = p.instance_types.iter().find(|c| c.allows(market)) else {
                continue;
            };
            let zone = p.zones.first().cloned();
            for _ in 0..n {
                if let Some(num) = self.launch(t, &choice.instance_type, market, zone.clone())
                    && let Some(i) = self.index_of(num)
                {
                    self.meta[i].ready = true;
                }
            }
        }
        self.state.desired = Some(p.min_workers);
    }

    /// Handles every event up to and including `t`, trace lines and simulated ones in time
    /// order. Returns the next unread trace line.
    fn advance_to(&mut self, t: i64, mut next_trace: usize) -> usize {
        let events = self.r.trace.events();
        loop {
            let trace_at = events.get(next_trace).map(TraceEvent::at_ms);
            let heap_at = self.heap.peek().map(|Reverse((at, _, _))| *at);
            match (trace_at, heap_at) {
                (Some(a), h) if a <= t && h.is_none_or(|h| a <= h) => {
                    self.on_trace(a.max(self.r.settings.start_ms), &events[next_trace]);
                    next_trace += 1;
                }
                (_, Some(h)) if h <= t => {
                    if let Some(Reverse((at, _, ev))) = self.heap.pop() {
                        self.on_event(at, ev);
                    }
                }
                _ => return next_trace,
            }
        }
    }

    fn on_trace(&mut self, t: i64, e: &TraceEvent) {
        match e {
            TraceEvent::Job(spec) => {
                let gpw = self.gpw;
                let (gpus, whole_workers) = match spec.size {
                    JobSize::Gpus(g) if g <= gpw => (g.max(1), None),
                    // A job spanning workers holds them whole, and is queued as such.
                    JobSize::Gpus(g) => {
                        (g.div_ceil(gpw).saturating_mul(gpw), Some(g.div_ceil(gpw)))
                    }
                    JobSize::Nodes(n) => (n.max(1).saturating_mul(gpw), Some(n.max(1))),
                };
                // A job from before the window is submitted as it opens.
                let spec = JobSpec {
                    at_ms: t,
                    ..spec.clone()
                };
                self.jobs.push(SimJob {
                    spec,
                    gpus,
                    whole_workers,
                    state: JobState::Waiting,
                    workers: Vec::new(),
                    seg_start: t,
                    productive_from: t,
                    rate: 1.0,
                    work_done: 0,
                    checkpointed: 0,
                    first_start: None,
                    finished_at: None,
                    epoch: 0,
                    restarts: 0,
                });
                self.enqueue(self.jobs.len() - 1);
                self.place(t);
                self.note_activity(t);
            }
            TraceEvent::SpotPrice {
                instance_type,
                zone,
                price,
                ..
            } => {
                self.prices
                    .set(instance_type, Market::Spot, zone.as_deref(), *price);
                for i in 0..self.workers.len() {
                    let w = &self.workers[i];
                    if w.stopped_at_ms.is_none()
                        && w.market == Market::Spot
                        && &w.instance_type == instance_type
                        && (zone.is_none() || w.zone == *zone)
                    {
                        self.settle(i, t);
                        self.meta[i].price = *price;
                    }
                }
            }
            TraceEvent::Interruption {
                instance_type,
                zone,
                count,
                ..
            } => {
                let mut targets: Vec<(i64, u64)> = self
                    .workers
                    .iter()
                    .zip(&self.meta)
                    .filter(|(w, _)| {
                        w.stopped_at_ms.is_none()
                            && w.warning.is_none()
                            && w.market == Market::Spot
                            && instance_type.as_ref().is_none_or(|x| *x == w.instance_type)
                            && zone.as_ref().is_none_or(|z| w.zone.as_ref() == Some(z))
                    })
                    .map(|(w, m)| (w.started_at_ms, m.num))
                    .collect();
                targets.sort();
                for (_, num) in targets.into_iter().take(*count as usize) {
                    self.warn(t, num);
                }
            }
            TraceEvent::InterruptionRate {
                instance_type,
                rate_per_hour,
                seed,
                ..
            } => {
                // A rate holds from its line until the next line for the same type.
                let source = match self
                    .rates
                    .iter()
                    .position(|r| r.instance_type == *instance_type)
                {
                    Some(i) => {
                        let r = &mut self.rates[i];
                        r.rate_per_hour = *rate_per_hour;
                        r.rng = Pcg64::seed_from_u64(*seed);
                        r.generation += 1;
                        i
                    }
                    None => {
                        self.rates.push(InterruptionDraws {
                            instance_type: instance_type.clone(),
                            rate_per_hour: *rate_per_hour,
                            rng: Pcg64::seed_from_u64(*seed),
                            generation: 0,
                        });
                        self.rates.len() - 1
                    }
                };
                let spot: Vec<(u64, String)> = self
                    .workers
                    .iter()
                    .zip(&self.meta)
                    .filter(|(w, _)| w.stopped_at_ms.is_none() && w.market == Market::Spot)
                    .map(|(w, m)| (m.num, w.instance_type.clone()))
                    .collect();
                for (num, it) in spot {
                    self.draw_interruption(t, num, &it, Some(source));
                }
            }
            TraceEvent::CapacityError {
                at_ms,
                instance_type,
                zone,
                market,
                duration_ms,
            } => self.gaps.push(CapacityGap {
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                market: *market,
                from: *at_ms,
                until: at_ms.saturating_add(*duration_ms),
            }),
        }
    }

    fn on_event(&mut self, t: i64, ev: Ev) {
        match ev {
            Ev::Ready(num) => {
                if let Some(i) = self.index_of(num)
                    && self.workers[i].stopped_at_ms.is_none()
                {
                    self.meta[i].ready = true;
                    self.place(t);
                }
            }
            Ev::Done(j, epoch) => {
                if self.jobs[j].epoch == epoch && self.jobs[j].state == JobState::Running {
                    self.release(j, t);
                    let job = &mut self.jobs[j];
                    job.state = JobState::Done;
                    job.finished_at = Some(t);
                    self.place(t);
                    self.note_activity(t);
                }
            }
            Ev::Reclaim(num) => {
                if let Some(i) = self.index_of(num) {
                    self.stop(i, t);
                    self.place(t);
                }
            }
            Ev::RateInterrupt(num, source, generation) => {
                // A later rate line for the same type replaced the one this was drawn from.
                if self
                    .rates
                    .get(source)
                    .is_some_and(|r| r.generation == generation)
                {
                    self.warn(t, num);
                }
            }
        }
    }

    fn enqueue(&mut self, j: usize) {
        let key = |s: &Sim<'_>, j: usize| {
            let job = &s.jobs[j];
            (Reverse(job.spec.priority), job.spec.at_ms, j)
        };
        let k = key(self, j);
        let pos = self.queue.partition_point(|&q| key(self, q) < k);
        self.queue.insert(pos, j);
        self.waiting_gpus += u64::from(self.jobs[j].gpus);
    }

    /// Starts waiting jobs that fit on ready workers, in queue order, looking at most
    /// `BACKFILL_DEPTH` jobs that do not fit deep (as a batch scheduler's backfill does), and
    /// not at all while no ready worker has a free GPU: a long queue stays cheap.
    fn place(&mut self, t: i64) {
        let mut i = 0;
        let mut passed = 0;
        while i < self.queue.len() && passed < BACKFILL_DEPTH && self.any_free() {
            let j = self.queue[i];
            if let Some(chosen) = self.fit(j) {
                self.queue.remove(i);
                self.waiting_gpus -= u64::from(self.jobs[j].gpus);
                self.start(j, chosen, t);
            } else {
                i += 1;
                passed += 1;
            }
        }
    }

    fn any_free(&self) -> bool {
        self.workers.iter().zip(&self.meta).any(|(w, m)| {
            m.ready && m.gpus_free > 0 && w.stopped_at_ms.is_none() && w.warning.is_none()
        })
    }

    /// Workers (indices) a job would run on now, if it fits.
    fn fit(&self, j: usize) -> Option<Vec<usize>> {
        let job = &self.jobs[j];
        let usable = |i: &usize| {
            let (w, m) = (&self.workers[*i], &self.meta[*i]);
            m.ready && w.stopped_at_ms.is_none() && w.warning.is_none()
        };
        match job.whole_workers {
            None => (0..self.workers.len())
                .filter(usable)
                .filter(|&i| self.meta[i].gpus_free >= job.gpus)
                .min_by_key(|&i| (self.meta[i].gpus_free, i))
                .map(|i| vec![i]),
            Some(n) => {
                let free: Vec<usize> = (0..self.workers.len())
                    .filter(usable)
                    .filter(|&i| self.meta[i].gpus_free == self.gpw)
                    .take(n as usize)
                    .collect();
                (free.len() == n as usize).then_some(free)
            }
        }
    }

    fn start(&mut self, j: usize, chosen: Vec<usize>, t: i64) {
        let per_worker = self.jobs[j].gpus_per_worker(self.gpw);
        let slowest = chosen
            .iter()
            .map(|&i| self.r.speed.factor(&self.workers[i].instance_type))
            .fold(1e-6, f64::max);
        let mut nums = Vec::with_capacity(chosen.len());
        for &i in &chosen {
            self.meta[i].gpus_free -= per_worker;
            self.meta[i].jobs.push(j);
            nums.push(self.meta[i].num);
        }
        let overhead = if self.jobs[j].restarts > 0 {
            self.r.settings.restart_overhead_ms
        } else {
            0
        };
        let job = &mut self.jobs[j];
        job.state = JobState::Running;
        job.workers = nums;
        job.seg_start = t;
        job.productive_from = t + overhead;
        job.rate = 1.0 / slowest;
        job.first_start.get_or_insert(t);
        let left = (job.spec.duration_ms - job.work_done).max(0) as f64 / job.rate;
        let done_at = job.productive_from.saturating_add(left.ceil() as i64);
        let epoch = job.epoch;
        self.running += 1;
        self.running_gpus += u64::from(self.jobs[j].gpus);
        self.push(done_at, Ev::Done(j, epoch));
    }

    /// Frees a running job's GPUs and books the time it held them.
    fn release(&mut self, j: usize, t: i64) {
        let nums = std::mem::take(&mut self.jobs[j].workers);
        let per_worker = self.jobs[j].gpus_per_worker(self.gpw);
        for num in nums {
            if let Some(i) = self.index_of(num) {
                self.meta[i].gpus_free += per_worker;
                self.meta[i].jobs.retain(|x| *x != j);
            }
        }
        let job = &self.jobs[j];
        self.used_gpu_ms += (t - job.seg_start).max(0) as f64 * f64::from(job.gpus);
        self.running = self.running.saturating_sub(1);
        self.running_gpus = self.running_gpus.saturating_sub(u64::from(job.gpus));
    }

    /// A running job loses its workers: it keeps what it saved and waits again.
    fn interrupt_job(&mut self, j: usize, t: i64) {
        if self.jobs[j].state != JobState::Running {
            return;
        }
        self.release(j, t);
        let job = &mut self.jobs[j];
        let (done, saved) = (job.work_at(t), job.saved_at(t));
        self.lost_gpu_ms += (done - saved).max(0) as f64 / job.rate * f64::from(job.gpus);
        job.work_done = saved;
        job.checkpointed = saved;
        job.state = JobState::Waiting;
        job.epoch += 1;
        job.restarts += 1;
        self.enqueue(j);
    }

    fn warn(&mut self, t: i64, num: u64) {
        let Some(i) = self.index_of(num) else { return };
        let w = &mut self.workers[i];
        if w.stopped_at_ms.is_some() || w.warning.is_some() || w.market != Market::Spot {
            return;
        }
        let notice = self.r.settings.notice_ms;
        w.warning = Some(Warning {
            kind: WarningKind::InterruptionWarning,
            at_ms: t,
            action_at_ms: Some(t + notice),
        });
        self.incidents.push(Incident {
            kind: IncidentKind::Interruption,
            instance_type: w.instance_type.clone(),
            zone: w.zone.clone(),
            at_ms: t,
        });
        self.interruptions += 1;
        self.push(t + notice, Ev::Reclaim(num));
    }

    /// Schedules rate-drawn interruptions of a new spot worker (from every source, or one).
    fn draw_interruption(&mut self, t: i64, num: u64, instance_type: &str, only: Option<usize>) {
        let end = self.r.settings.end_ms;
        let mut when = Vec::new();
        let range = match only {
            Some(k) => k..k + 1,
            None => 0..self.rates.len(),
        };
        for k in range {
            let Some(src) = self.rates.get_mut(k) else {
                continue;
            };
            if src.rate_per_hour <= 0.0
                || src
                    .instance_type
                    .as_ref()
                    .is_some_and(|x| x != instance_type)
            {
                continue;
            }
            // Exponential waiting time from a uniform draw in [0, 1).
            let u = (src.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let hours = -(1.0 - u).ln() / src.rate_per_hour;
            let at = t as f64 + hours * HOUR_MS;
            if at < end as f64 {
                when.push((at as i64, k, src.generation));
            }
        }
        for (at, k, generation) in when {
            self.push(at, Ev::RateInterrupt(num, k, generation));
        }
    }

    /// Books a worker's cost up to `t` at its current price.
    fn settle(&mut self, i: usize, t: i64) {
        let m = &mut self.meta[i];
        let dollars = (t - m.settled_at).max(0) as f64 / HOUR_MS * m.price;
        m.cost += dollars;
        m.settled_at = t.max(m.settled_at);
    }

    fn launch(
        &mut self,
        t: i64,
        instance_type: &str,
        market: Market,
        zone: Option<String>,
    ) -> Option<u64> {
        if let Some(gap) = self.gaps.iter().find(|g| {
            g.instance_type == instance_type
                && g.market == market
                && t >= g.from
                && t < g.until
                && (g.zone.is_none() || zone.is_none() || g.zone == zone)
        }) {
            self.incidents.push(Incident {
                kind: IncidentKind::CapacityError,
                instance_type: instance_type.to_string(),
                zone: gap.zone.clone().or(zone),
                at_ms: t,
            });
            self.capacity_errors += 1;
            return None;
        }
        let num = self.next_num;
        self.next_num += 1;
        let price = self
            .prices
            .price(instance_type, market, zone.as_deref())
            .unwrap_or(0.0);
        self.workers.push(Worker {
            id: format!("sim-{num}"),
            instance_type: instance_type.to_string(),
            market,
            zone,
            started_at_ms: t,
            stopped_at_ms: None,
            warning: None,
            utilization: None,
            gpu_memory_gib: None,
        });
        self.meta.push(Meta {
            num,
            ready: false,
            gpus_free: self.gpw,
            jobs: Vec::new(),
            launched_at: t,
            price,
            settled_at: t,
            cost: 0.0,
            saved_on_notice: false,
        });
        self.launches += 1;
        self.push(t + self.r.settings.startup_ms, Ev::Ready(num));
        if market == Market::Spot {
            self.draw_interruption(t, num, instance_type, None);
        }
        Some(num)
    }

    /// Stops a worker: its jobs are interrupted and its bill closed (rounded, with the minimum).
    fn stop(&mut self, i: usize, t: i64) {
        if self.workers[i].stopped_at_ms.is_some() {
            return;
        }
        for j in self.meta[i].jobs.clone() {
            self.interrupt_job(j, t);
        }
        self.settle(i, t);
        let m = &mut self.meta[i];
        let ran = t - m.launched_at;
        let billed = self.billing.billed_ms(ran);
        m.cost += (billed - ran).max(0) as f64 / HOUR_MS * m.price;
        self.paid_gpu_ms += billed as f64 * f64::from(self.gpw);
        let cost = m.cost;
        let w = &mut self.workers[i];
        w.stopped_at_ms = Some(t);
        let market = w.market;
        self.book(market, cost);
        if self.r.policy.daily_budget.is_none() {
            self.workers.swap_remove(i);
            self.meta.swap_remove(i);
        }
    }

    /// Adds a closed bill to its market.
    fn book(&mut self, market: Market, dollars: f64) {
        match market {
            Market::OnDemand => self.cost.on_demand += dollars,
            Market::Spot => self.cost.spot += dollars,
        }
    }

    /// Stopped workers count towards the day's spend only on their day.
    fn forget_stopped(&mut self) {
        let mut i = 0;
        while i < self.workers.len() {
            if self.workers[i].stopped_at_ms.is_some() {
                self.workers.swap_remove(i);
                self.meta.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn spent_by(&self, t: i64) -> f64 {
        let open: f64 = self
            .workers
            .iter()
            .zip(&self.meta)
            .filter(|(w, _)| w.stopped_at_ms.is_none())
            .map(|(_, m)| m.cost + (t - m.settled_at).max(0) as f64 / HOUR_MS * m.price)
            .sum();
        self.cost.on_demand + self.cost.spot + open
    }

    /// The scheduler's view at `t`: the pool turns idle the moment nothing runs or waits,
    /// which is the first idle observation a sender reporting on every change would make.
    fn note_activity(&mut self, t: i64) {
        if self.running > 0 || !self.queue.is_empty() {
            self.idle_since = None;
        } else if self.idle_since.is_none() {
            self.idle_since = Some(t);
        }
    }

    /// One evaluation at `t`, and its actions carried out.
    fn decide(&mut self, t: i64) {
        let p = self.r.policy;
        let gpw = f64::from(self.gpw);
        for (w, m) in self.workers.iter_mut().zip(&self.meta) {
            w.utilization = m.ready.then(|| f64::from(self.gpw - m.gpus_free) / gpw);
        }
        self.note_activity(t);
        // A scheduler reports its queue to a queue-mode pool in jobs of the policy's
        // `gpus_per_job`: a job of twice that size counts twice, a quarter-size job a quarter.
        let unit = match p.mode {
            Mode::Queue { gpus_per_job } => f64::from(gpus_per_job.max(1)),
            _ => gpw,
        };
        let waiting = self.waiting_gpus as f64 / unit;
        let running = self.running_gpus as f64 / unit;
        let lookback = p.incident_lookback_ms();
        self.incidents.retain(|x| t - x.at_ms < lookback);
        let signals = Signals {
            queue_depth: Some(waiting),
            pending_jobs: None,
            running_jobs: Some(running),
            idle_since_ms: self.idle_since,
        };
        let outcome = evaluate(&PoolInput {
            policy: p,
            state: &self.state,
            workers: &self.workers,
            signals: &signals,
            incidents: &self.incidents,
            prices: &self.prices,
            since_ms: self.r.settings.start_ms,
            now_ms: t,
            explain: false,
        });
        self.evaluations += 1;
        self.state = outcome.state;
        for e in &outcome.events {
            match e {
                DecisionEvent::Scaled { .. } => self.scaling_actions += 1,
                DecisionEvent::BudgetAlarm { .. } => self.budget_alarms += 1,
                DecisionEvent::Replacement { .. } => {}
            }
        }
        for a in outcome.decision.actions {
            match a {
                Action::Checkpoint { worker, .. } => self.checkpoint_on(&worker, t),
                Action::ScaleUp {
                    instance_type,
                    market,
                    count,
                    zones,
                    ..
                } => {
                    for _ in 0..count {
                        if self
                            .launch(t, &instance_type, market, zones.first().cloned())
                            .is_none()
                        {
                            break;
                        }
                    }
                }
                Action::Replace {
                    instance_type,
                    market,
                    zones,
                    ..
                } => {
                    self.launch(t, &instance_type, market, zones.first().cloned());
                }
                Action::ScaleDown { workers } => {
                    for id in workers {
                        if let Some(i) = self.workers.iter().position(|w| w.id == id) {
                            self.stop(i, t);
                        }
                    }
                    self.place(t);
                }
            }
        }
    }

    /// The decision told the jobs on a warned worker to save their work now. The action
    /// repeats while the notice lasts; a job saves on the first one.
    fn checkpoint_on(&mut self, worker: &str, t: i64) {
        let Some(i) = self.workers.iter().position(|w| w.id == worker) else {
            return;
        };
        if std::mem::replace(&mut self.meta[i].saved_on_notice, true) {
            return;
        }
        for j in self.meta[i].jobs.clone() {
            let job = &mut self.jobs[j];
            if job.state == JobState::Running && job.spec.checkpoint_interval_ms.is_some() {
                job.checkpointed = job.checkpointed.max(job.work_at(t));
            }
        }
    }

    /// Closes the window: workers still running are billed up to its end.
    fn finish(mut self, end: i64) -> PolicyReport {
        for j in 0..self.jobs.len() {
            if self.jobs[j].state == JobState::Running {
                let job = &self.jobs[j];
                self.used_gpu_ms += (end - job.seg_start).max(0) as f64 * f64::from(job.gpus);
            }
        }
        for i in 0..self.workers.len() {
            if self.workers[i].stopped_at_ms.is_none() {
                self.settle(i, end);
                let m = &self.meta[i];
                self.paid_gpu_ms += (end - m.launched_at).max(0) as f64 * f64::from(self.gpw);
                let (market, cost) = (self.workers[i].market, m.cost);
                self.book(market, cost);
            }
        }
        let mut waits: Vec<f64> = self
            .jobs
            .iter()
            .map(|j| (j.first_start.unwrap_or(end) - j.spec.at_ms).max(0) as f64 / 1000.0)
            .collect();
        let finished = self
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Done)
            .count() as u32;
        // Jobs submitted after the window never ran: unfinished too.
        let unfinished = (self.r.trace.jobs().count() as u32).saturating_sub(finished);
        let makespan = (unfinished == 0 && !self.jobs.is_empty()).then(|| {
            let first = self.jobs.iter().map(|j| j.spec.at_ms).min().unwrap_or(0);
            let last = self
                .jobs
                .iter()
                .filter_map(|j| j.finished_at)
                .max()
                .unwrap_or(first);
            (last - first) as f64 / 1000.0
        });
        let gpu_hours_paid = self.paid_gpu_ms / HOUR_MS;
        let gpu_hours_used = self.used_gpu_ms / HOUR_MS;
        PolicyReport {
            name: self.r.name.to_string(),
            total_cost: self.cost.on_demand + self.cost.spot,
            cost_by_market: self.cost.clone(),
            gpu_hours_paid,
            gpu_hours_used,
            idle_share: if gpu_hours_paid > 0.0 {
                (1.0 - gpu_hours_used / gpu_hours_paid).max(0.0)
            } else {
                0.0
            },
            wait_p50_sec: percentile(&mut waits, 0.5),
            wait_p95_sec: percentile(&mut waits, 0.95),
            makespan_sec: makespan,
            interruptions: self.interruptions,
            lost_gpu_hours: self.lost_gpu_ms / HOUR_MS,
            scaling_actions: self.scaling_actions,
            launches: self.launches,
            capacity_errors: self.capacity_errors,
            budget_alarms: self.budget_alarms,
            jobs_finished: finished,
            jobs_unfinished: unfinished,
            evaluations: self.evaluations,
            saving_vs_fixed_on_demand: None,
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
