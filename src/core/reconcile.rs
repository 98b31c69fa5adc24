//! From a pool decision and what its cloud group holds now to the calls that close the gap.
//! Pure: the reconciler (`crate::reconcile`) describes the group, asks the same decision
//! `POST /decide` gives, plans here, and executes the plan through a provider.
//!
//! Order matters: chosen workers are terminated first (with the group's desired capacity
//! lowered by as many, so the group does not replace them), then the group is set to the
//! target. An interrupted worker stays counted in the group (so its replacement launches
//! while it saves its state) until its job reports a checkpoint or the cloud's deadline
//! passes; then it is terminated the same way.

use serde::Serialize;

use super::capacity::{Capacity, CapacitySpec, CloudWorker, Distribution, Target, WorkerState};
use super::policy::Policy;
use super::scale::{Action, WarningKind, Worker, WorkersDecision};

/// One call to make.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Terminate these workers and lower the group's desired capacity by as many.
    Terminate {
        workers: Vec<String>,
        /// `scale_down` (the decision chose them) or `interrupted` (checkpoint saved, or the
        /// cloud's deadline passed).
        why: &'static str,
    },
    /// Set the group's bounds, distribution and desired capacity.
    SetCapacity { spec: CapacitySpec },
}

/// What the reconciler knows beside the decision.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub policy: &'a Policy,
    pub decision: &'a WorkersDecision,
    pub capacity: &'a Capacity,
    /// The pool's workers as stored (with interruption warnings).
    pub workers: &'a [Worker],
    /// (worker, when its job last saved a checkpoint).
    pub checkpoints: &'a [(String, i64)],
    pub now_ms: i64,
    pub matching: Matching,
}

/// How a provider's groups hold the decision, and so what the plan compares to find a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matching {
    /// One group splits its capacity by its distribution on its own (an AWS auto scaling
    /// group, an Alibaba scaling group): compare the desired capacity, bounds and distribution.
    Distribution,
    /// The provider launches exactly the decision's per-type targets (the static provider):
    /// compare the live workers of each type and market.
    PerTarget,
    /// One group per market, each running the single machine type of its template (GCP's
    /// standard and Spot MIGs): compare the live workers of each market. A worker the cloud
    /// cannot create counts as missing, so a market whose group is stuck asks again.
    PerMarket,
}

/// The steps, in order; empty when the group already matches the decision.
pub fn plan(input: &PlanInput<'_>) -> Vec<Step> {
    let cap = input.capacity;
    let present = |id: &str| {
        cap.workers
            .iter()
            .any(|w| w.id == id && w.state != WorkerState::Terminating)
    };
    let mut steps = Vec::new();
    let mut terminated: Vec<String> = Vec::new();

    let chosen: Vec<String> = input
        .decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::ScaleDown { workers } => Some(workers),
            _ => None,
        })
        .flatten()
        .filter(|id| present(id))
        .cloned()
        .collect();
    if !chosen.is_empty() {
        terminated.extend(chosen.iter().cloned());
        steps.push(Step::Terminate {
            workers: chosen,
            why: "scale_down",
        });
    }

    let mut released = Vec::new();
    let mut kept_doomed: Vec<&Worker> = Vec::new();
    for w in input.workers.iter().filter(|w| is_doomed(w)) {
        if !present(&w.id) || terminated.contains(&w.id) {
            continue;
        }
        if may_release(w, input.checkpoints, input.now_ms) {
            released.push(w.id.clone());
        } else {
            kept_doomed.push(w);
        }
    }
    if !released.is_empty() {
        terminated.extend(released.iter().cloned());
        steps.push(Step::Terminate {
            workers: released,
            why: "interrupted",
        });
    }

    let mut spec = spec_for(input.policy, input.decision, &kept_doomed);
    let surplus = if input.matching == Matching::PerMarket {
        market_surplus(input, &mut spec, &terminated)
    } else {
        Vec::new()
    };
    let desired_after_terminations = cap
        .desired
        .saturating_sub(u32::try_from(terminated.len()).unwrap_or(u32::MAX));
    let differs = match input.matching {
        Matching::PerTarget => {
            desired_after_terminations != spec.desired
                || targets_differ(&spec.targets, cap, &terminated)
        }
        Matching::PerMarket => {
            desired_after_terminations != spec.desired
                || markets_differ(&spec.targets, cap, &terminated)
        }
        Matching::Distribution => {
            let distribution_differs = cap
                .distribution
                .as_ref()
                .is_some_and(|d| *d != spec.distribution);
            desired_after_terminations != spec.desired
                || cap.min != spec.min
                || cap.max != spec.max
                || distribution_differs
        }
    };
    if differs {
        steps.push(Step::SetCapacity { spec });
    }
    if !surplus.is_empty() {
        steps.push(Step::Terminate {
            workers: surplus,
            why: "scale_down",
        });
    }
    steps
}

/// One group per market shrinks by deleting chosen instances, not by a resize that lets the
/// cloud choose: for each market holding more live workers than its targets, the surplus,
/// idle ones first (as the decision's own scale-down picks). They stay in `spec`'s targets,
/// so the set-capacity step grows the other market first and the pool never dips below the
/// target; the termination that follows removes them and lowers their group by as many.
fn market_surplus(
    input: &PlanInput<'_>,
    spec: &mut CapacitySpec,
    terminated: &[String],
) -> Vec<String> {
    use super::catalog::Market;
    let mut out = Vec::new();
    for market in [Market::OnDemand, Market::Spot] {
        let want: usize = spec
            .targets
            .iter()
            .filter(|t| t.market == market)
            .map(|t| t.count as usize)
            .sum();
        let live: Vec<&CloudWorker> = input
            .capacity
            .workers
            .iter()
            .filter(|w| {
                w.state != WorkerState::Terminating
                    && w.market == market
                    && !terminated.contains(&w.id)
            })
            .collect();
        let Some(excess) = live.len().checked_sub(want).filter(|n| *n > 0) else {
            continue;
        };
        let stored = |id: &str| input.workers.iter().find(|w| w.id == id);
        // Interrupted workers saving their state are counted in the targets already.
        let mut candidates: Vec<&CloudWorker> = live
            .into_iter()
            .filter(|w| !stored(&w.id).is_some_and(is_doomed))
            .collect();
        let util = |w: &CloudWorker| {
            stored(&w.id).map_or(0.0, |s| {
                if super::idle::idle_by_memory(input.policy, s.gpu_memory_gib) {
                    0.0
                } else {
                    s.utilization.unwrap_or(0.0)
                }
            })
        };
        let idle = |w: &CloudWorker| {
            w.state != WorkerState::Running || util(w) < input.policy.idle_utilization_threshold
        };
        candidates.sort_by(|a, b| {
            idle(b)
                .cmp(&idle(a))
                .then((b.state != WorkerState::Running).cmp(&(a.state != WorkerState::Running)))
                .then(util(a).total_cmp(&util(b)))
                .then(b.launched_at_ms.cmp(&a.launched_at_ms))
                .then(a.id.cmp(&b.id))
        });
        let chosen: Vec<&CloudWorker> = candidates.into_iter().take(excess).collect();
        for w in &chosen {
            match spec.targets.iter_mut().find(|t| t.market == market) {
                Some(t) => t.count += 1,
                None => spec.targets.push(Target {
                    instance_type: w.instance_type.clone(),
                    market,
                    count: 1,
                    zones: vec![],
                }),
            }
            spec.desired = spec.desired.saturating_add(1);
        }
        out.extend(chosen.iter().map(|w| w.id.clone()));
    }
    spec.max = spec.max.max(spec.desired);
    out
}

/// Whether the live workers (after `terminated` go) differ from the targets per type and
/// market; interrupted workers kept for their checkpoint are extra and not compared.
fn targets_differ(targets: &[Target], cap: &Capacity, terminated: &[String]) -> bool {
    let live = |t: &Target| {
        cap.workers
            .iter()
            .filter(|w| {
                w.state != WorkerState::Terminating
                    && !terminated.contains(&w.id)
                    && w.instance_type == t.instance_type
                    && w.market == t.market
            })
            .count()
    };
    targets.iter().any(|t| live(t) < t.count as usize)
}

/// Whether either market has fewer live workers (after `terminated` go) than the targets of
/// that market add up to. With the total equal, one market short means the other is over.
fn markets_differ(targets: &[Target], cap: &Capacity, terminated: &[String]) -> bool {
    [
        super::catalog::Market::OnDemand,
        super::catalog::Market::Spot,
    ]
    .into_iter()
    .any(|market| {
        let want: u32 = targets
            .iter()
            .filter(|t| t.market == market)
            .map(|t| t.count)
            .sum();
        let live = cap
            .workers
            .iter()
            .filter(|w| {
                w.state != WorkerState::Terminating
                    && !terminated.contains(&w.id)
                    && w.market == market
            })
            .count();
        live < want as usize
    })
}

/// The group's shape for a decision: the target plus the interrupted workers still saving
/// their state, the policy's bounds widened to hold that, and the market mix and instance
/// types (recent capacity errors left out) as a mixed-instances distribution.
pub fn spec_for(
    policy: &Policy,
    decision: &WorkersDecision,
    kept_doomed: &[&Worker],
) -> CapacitySpec {
    let desired = decision
        .desired
        .saturating_add(u32::try_from(kept_doomed.len()).unwrap_or(u32::MAX));
    let spot_allowed = policy.any_allows(super::catalog::Market::Spot);
    let instance_types = if decision.usable_types.is_empty() {
        policy
            .instance_types
            .iter()
            .map(|c| c.instance_type.clone())
            .collect()
    } else {
        decision.usable_types.clone()
    };
    CapacitySpec {
        desired,
        min: policy.min_workers.min(desired),
        max: policy.max_workers.max(desired),
        distribution: Distribution {
            on_demand_base: policy.on_demand_base,
            on_demand_percentage_above_base: if spot_allowed {
                100 - policy.spot_percentage.min(100)
            } else {
                100
            },
            instance_types,
        },
        targets: targets_with(decision, kept_doomed),
    }
}

/// The decision's per-type targets, each also holding the interrupted workers of its type and
/// market that stay until their checkpoint (they are not capacity the target can count on).
fn targets_with(decision: &WorkersDecision, kept_doomed: &[&Worker]) -> Vec<Target> {
    let mut targets: Vec<Target> = decision
        .by_type
        .iter()
        .filter(|t| t.count > 0)
        .map(|t| Target {
            instance_type: t.instance_type.clone(),
            market: t.market,
            count: t.count,
            zones: t.zones.clone(),
        })
        .collect();
    for w in kept_doomed {
        match targets
            .iter_mut()
            .find(|t| t.instance_type == w.instance_type && t.market == w.market)
        {
            Some(t) => t.count += 1,
            None => targets.push(Target {
                instance_type: w.instance_type.clone(),
                market: w.market,
                count: 1,
                zones: vec![],
            }),
        }
    }
    targets
}

fn is_doomed(w: &Worker) -> bool {
    w.stopped_at_ms.is_none()
        && w.warning
            .as_ref()
            .is_some_and(|x| x.kind == WarningKind::InterruptionWarning)
}

/// An interrupted worker may go once its job saved a checkpoint after the warning, or once
/// the cloud's deadline has passed (the instance is lost then anyway).
fn may_release(w: &Worker, checkpoints: &[(String, i64)], now_ms: i64) -> bool {
    let Some(warning) = &w.warning else {
        return false;
    };
    let saved = checkpoints
        .iter()
        .any(|(id, at)| *id == w.id && *at >= warning.at_ms);
    saved || warning.action_at_ms.is_some_and(|d| now_ms >= d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::capacity::CloudWorker;
    use crate::core::catalog::Market;
    use crate::core::policy::test_policy;
    use crate::core::scale::Warning;

    const NOW: i64 = 1_800_000_000_000;

    fn decision(desired: u32, actions: Vec<Action>) -> WorkersDecision {
        WorkersDecision {
            current: 0,
            desired,
            previous_desired: 0,
            need: desired,
            by_type: vec![],
            usable_types: vec!["g4dn.12xlarge".into(), "g5.12xlarge".into()],
            delta: 0,
            actions,
            reasons: vec![],
            cooldown_until: None,
            next_evaluation_at: String::new(),
            cooldown_until_ms: None,
            next_evaluation_at_ms: NOW,
            cost_per_hour: 0.0,
            budget: None,
        }
    }

    fn cloud(ids: &[&str]) -> Vec<CloudWorker> {
        ids.iter()
            .map(|id| CloudWorker {
                id: (*id).into(),
                instance_type: "g4dn.12xlarge".into(),
                market: Market::Spot,
                zone: None,
                state: WorkerState::Running,
                launched_at_ms: Some(NOW - 3_600_000),
                aliases: Vec::new(),
            })
            .collect()
    }

    /// A group that already has the policy's shape.
    fn group(desired: u32, ids: &[&str]) -> Capacity {
        let spec = spec_for(&test_policy(), &decision(desired, vec![]), &[]);
        Capacity {
            desired,
            min: spec.min,
            max: spec.max,
            distribution: Some(spec.distribution),
            workers: cloud(ids),
        }
    }

    fn interrupted(id: &str, deadline: i64) -> Worker {
        Worker {
            id: id.into(),
            instance_type: "g4dn.12xlarge".into(),
            market: Market::Spot,
            zone: None,
            started_at_ms: NOW - 3_600_000,
            stopped_at_ms: None,
            warning: Some(Warning {
                kind: WarningKind::InterruptionWarning,
                at_ms: NOW - 30_000,
                action_at_ms: Some(deadline),
            }),
            utilization: None,
            gpu_memory_gib: None,
        }
    }

    fn run(
        d: &WorkersDecision,
        cap: &Capacity,
        workers: &[Worker],
        cps: &[(String, i64)],
    ) -> Vec<Step> {
        plan(&PlanInput {
            policy: &test_policy(),
            decision: d,
            capacity: cap,
            workers,
            checkpoints: cps,
            now_ms: NOW,
            matching: Matching::Distribution,
        })
    }

    #[test]
    fn a_group_that_matches_gets_no_call() {
        assert_eq!(
            run(&decision(2, vec![]), &group(2, &["a", "b"]), &[], &[]),
            vec![]
        );
    }

    #[test]
    fn a_new_target_sets_desired_with_the_mixed_instances_shape() {
        let steps = run(&decision(3, vec![]), &group(2, &["a", "b"]), &[], &[]);
        let [Step::SetCapacity { spec }] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        assert_eq!(spec.desired, 3);
        assert_eq!(spec.distribution.on_demand_percentage_above_base, 20);
        assert_eq!(
            spec.distribution.instance_types,
            vec!["g4dn.12xlarge", "g5.12xlarge"]
        );
    }

    #[test]
    fn chosen_workers_are_terminated_with_decrement_and_nothing_else_is_needed() {
        let d = decision(
            1,
            vec![Action::ScaleDown {
                workers: vec!["b".into(), "gone".into()],
            }],
        );
        let steps = run(&d, &group(2, &["a", "b"]), &[], &[]);
        assert_eq!(
            steps,
            vec![Step::Terminate {
                workers: vec!["b".into()],
                why: "scale_down"
            }],
            "the decrement takes the group to 1; an instance the group no longer has is skipped"
        );
    }

    #[test]
    fn an_interrupted_worker_stays_until_its_checkpoint_then_goes() {
        // Target 2 healthy workers; `b` is being interrupted and still saving its state: the
        // group holds 3 so the replacement launches beside it.
        let workers = [interrupted("b", NOW + 90_000)];
        let steps = run(&decision(2, vec![]), &group(2, &["a", "b"]), &workers, &[]);
        let [Step::SetCapacity { spec }] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        assert_eq!(spec.desired, 3);
        // A checkpoint from before the warning does not count; one after it does.
        let old = [("b".to_string(), NOW - 60_000)];
        let steps = run(
            &decision(2, vec![]),
            &group(3, &["a", "b", "c"]),
            &workers,
            &old,
        );
        assert_eq!(steps, vec![]);
        let saved = [("b".to_string(), NOW - 1_000)];
        let steps = run(
            &decision(2, vec![]),
            &group(3, &["a", "b", "c"]),
            &workers,
            &saved,
        );
        assert_eq!(
            steps,
            vec![Step::Terminate {
                workers: vec!["b".into()],
                why: "interrupted"
            }]
        );
    }

    #[test]
    fn an_interrupted_worker_past_its_deadline_goes_without_a_checkpoint() {
        let workers = [interrupted("b", NOW - 1)];
        let steps = run(
            &decision(2, vec![]),
            &group(3, &["a", "b", "c"]),
            &workers,
            &[],
        );
        assert_eq!(
            steps,
            vec![Step::Terminate {
                workers: vec!["b".into()],
                why: "interrupted"
            }]
        );
    }

    #[test]
    fn a_type_out_of_capacity_leaves_the_group_type_list() {
        let mut d = decision(2, vec![]);
        d.usable_types = vec!["g5.12xlarge".into()];
        let steps = run(&d, &group(2, &["a", "b"]), &[], &[]);
        let [Step::SetCapacity { spec }] = steps.as_slice() else {
            panic!("{steps:?}")
        };
        assert_eq!(spec.distribution.instance_types, vec!["g5.12xlarge"]);
    }

    /// Two groups, one per market, sized `od` and `spot`, as the GCP adapter reports them.
    fn per_market(od: &[&str], spot: &[&str]) -> Capacity {
        let mut workers = cloud(od);
        for w in &mut workers {
            w.market = Market::OnDemand;
        }
        workers.extend(cloud(spot));
        Capacity {
            desired: (od.len() + spot.len()) as u32,
            min: 0,
            max: (od.len() + spot.len()) as u32,
            distribution: Some(Distribution {
                on_demand_base: od.len() as u32,
                on_demand_percentage_above_base: 0,
                instance_types: vec!["g4dn.12xlarge".into()],
            }),
            workers,
        }
    }

    fn split(od: u32, spot: u32) -> WorkersDecision {
        let mut d = decision(od + spot, vec![]);
        for (market, count) in [(Market::OnDemand, od), (Market::Spot, spot)] {
            if count > 0 {
                d.by_type.push(crate::core::scale::TypeTarget {
                    instance_type: "g4dn.12xlarge".into(),
                    market,
                    count,
                    zones: vec![],
                    avoid_zones: vec![],
                });
            }
        }
        d
    }

    fn run_per_market(d: &WorkersDecision, cap: &Capacity) -> Vec<Step> {
        plan(&PlanInput {
            policy: &test_policy(),
            decision: d,
            capacity: cap,
            workers: &[],
            checkpoints: &[],
            now_ms: NOW,
            matching: Matching::PerMarket,
        })
    }

    #[test]
    fn per_market_groups_that_hold_the_split_get_no_call_whatever_their_distribution_says() {
        // The policy's distribution (20% on-demand) is not the groups' (base 1, rest spot),
        // but the markets hold exactly the targets.
        assert_eq!(
            run_per_market(&split(1, 2), &per_market(&["a"], &["b", "c"])),
            vec![]
        );
    }

    #[test]
    fn per_market_groups_are_set_when_the_split_moves_at_the_same_total() {
        // Spot fell back to on-demand: three on-demand wanted, one held. The on-demand group
        // grows first while the spot workers stay, then they are deleted.
        let steps = run_per_market(&split(3, 0), &per_market(&["a"], &["b", "c"]));
        let [Step::SetCapacity { spec }, Step::Terminate { workers, why }] = steps.as_slice()
        else {
            panic!("{steps:?}")
        };
        assert_eq!(spec.desired, 5);
        let counts: Vec<(Market, u32)> = spec.targets.iter().map(|t| (t.market, t.count)).collect();
        assert_eq!(counts, [(Market::OnDemand, 3), (Market::Spot, 2)]);
        assert_eq!((workers.len(), *why), (2, "scale_down"));
    }

    #[test]
    fn a_shrinking_market_loses_its_idle_workers_first() {
        // Two spot workers, one busy, one idle; the decision moves one of them to on-demand.
        let cap = per_market(&[], &["busy", "idle"]);
        let stored = |id: &str, utilization: f64| Worker {
            id: id.into(),
            instance_type: "g4dn.12xlarge".into(),
            market: Market::Spot,
            zone: None,
            started_at_ms: NOW - 3_600_000,
            stopped_at_ms: None,
            warning: None,
            utilization: Some(utilization),
            gpu_memory_gib: None,
        };
        // Same age: by name alone the busy one would go first.
        let workers = [stored("busy", 0.9), stored("idle", 0.02)];
        let steps = plan(&PlanInput {
            policy: &test_policy(),
            decision: &split(1, 1),
            capacity: &cap,
            workers: &workers,
            checkpoints: &[],
            now_ms: NOW,
            matching: Matching::PerMarket,
        });
        let [
            Step::SetCapacity { spec },
            Step::Terminate { workers: gone, .. },
        ] = steps.as_slice()
        else {
            panic!("{steps:?}")
        };
        assert_eq!(gone, &["idle".to_string()]);
        assert_eq!(
            spec.desired, 3,
            "the idle one stays until on-demand has grown"
        );
        // The distribution rule leaves the choice to the group.
        assert!(
            !run(&split(1, 1), &cap, &workers, &[])
                .iter()
                .any(|s| matches!(s, Step::Terminate { .. })),
        );
    }

    #[test]
    fn a_worker_the_cloud_cannot_create_leaves_its_market_short() {
        let mut cap = per_market(&["a"], &["b", "c"]);
        cap.workers[2].state = WorkerState::Terminating;
        let steps = run_per_market(&split(1, 2), &cap);
        assert!(
            matches!(steps.as_slice(), [Step::SetCapacity { .. }]),
            "{steps:?}"
        );
        // The same group under the distribution rule would see nothing to do.
        let mut same = cap.clone();
        same.distribution = Some(spec_for(&test_policy(), &split(1, 2), &[]).distribution);
        same.min = 0;
        same.max = 4;
        assert_eq!(run(&split(1, 2), &same, &[], &[]), vec![]);
    }
}
