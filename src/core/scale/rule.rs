//! The rules a pool decision can fire, by name, and the recorder that keeps the reasons.
//! The names are part of the API (`reasons[].rule`), the fleet page and the docs: the enum
//! only makes a misspelt rule a compile error, it serialises to the same words.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Reason;

/// One rule of the worker decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    Queue,
    NoUtilizationSignal,
    WithinTolerance,
    Utilization,
    Elastic,
    Bounds,
    NoSignal,
    IdleWait,
    ScaleDownCooldown,
    IdleToZero,
    ScaleUpCooldown,
    ScaleFromZero,
    StepLimit,
    ScaleUp,
    Stabilization,
    ScaleDown,
    RunningFloor,
    GangDoesNotFit,
    WholeGang,
    BudgetCap,
    BudgetExceeded,
    SpotFallback,
    NoUsableType,
    MarketMix,
    Replace,
}

impl Rule {
    /// Every rule, for the tests that check the names.
    pub const ALL: [Rule; 25] = [
        Rule::Queue,
        Rule::NoUtilizationSignal,
        Rule::WithinTolerance,
        Rule::Utilization,
        Rule::Elastic,
        Rule::Bounds,
        Rule::NoSignal,
        Rule::IdleWait,
        Rule::ScaleDownCooldown,
        Rule::IdleToZero,
        Rule::ScaleUpCooldown,
        Rule::ScaleFromZero,
        Rule::StepLimit,
        Rule::ScaleUp,
        Rule::Stabilization,
        Rule::ScaleDown,
        Rule::RunningFloor,
        Rule::GangDoesNotFit,
        Rule::WholeGang,
        Rule::BudgetCap,
        Rule::BudgetExceeded,
        Rule::SpotFallback,
        Rule::NoUsableType,
        Rule::MarketMix,
        Rule::Replace,
    ];

    /// The rule's name as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Queue => "queue",
            Rule::NoUtilizationSignal => "no_utilization_signal",
            Rule::WithinTolerance => "within_tolerance",
            Rule::Utilization => "utilization",
            Rule::Elastic => "elastic",
            Rule::Bounds => "bounds",
            Rule::NoSignal => "no_signal",
            Rule::IdleWait => "idle_wait",
            Rule::ScaleDownCooldown => "scale_down_cooldown",
            Rule::IdleToZero => "idle_to_zero",
            Rule::ScaleUpCooldown => "scale_up_cooldown",
            Rule::ScaleFromZero => "scale_from_zero",
            Rule::StepLimit => "step_limit",
            Rule::ScaleUp => "scale_up",
            Rule::Stabilization => "stabilization",
            Rule::ScaleDown => "scale_down",
            Rule::RunningFloor => "running_floor",
            Rule::GangDoesNotFit => "gang_does_not_fit",
            Rule::WholeGang => "whole_gang",
            Rule::BudgetCap => "budget_cap",
            Rule::BudgetExceeded => "budget_exceeded",
            Rule::SpotFallback => "spot_fallback",
            Rule::NoUsableType => "no_usable_type",
            Rule::MarketMix => "market_mix",
            Rule::Replace => "replace",
        }
    }
}

impl PartialEq<&str> for Rule {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The reasons of one decision, in the order the rules fired.
pub(super) struct Rules {
    pub(super) reasons: Vec<Reason>,
    explain: bool,
}

impl Rules {
    pub(super) fn new(explain: bool) -> Self {
        Rules {
            // Room for the rules a decision usually fires, so the list is allocated once.
            reasons: Vec::with_capacity(8),
            explain,
        }
    }

    /// Records a rule that fired; its words and numbers only when explaining, since
    /// formatting them costs more than the rule itself.
    pub(super) fn fire(
        &mut self,
        rule: Rule,
        detail: impl FnOnce() -> String,
        values: &[(&'static str, f64)],
    ) {
        let (detail, values) = if self.explain {
            (detail(), values.iter().copied().collect())
        } else {
            (String::new(), BTreeMap::new())
        };
        self.reasons.push(Reason {
            rule,
            detail,
            values,
        });
    }

    /// Whether `rule` fired (for the stages' tests).
    #[cfg(test)]
    pub(super) fn fired(&self, rule: Rule) -> bool {
        self.reasons.iter().any(|r| r.rule == rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_serialises_to_its_api_name() {
        for rule in Rule::ALL {
            let json = serde_json::to_value(rule).expect("serialises");
            assert_eq!(json, serde_json::Value::String(rule.as_str().into()));
        }
    }

    #[test]
    fn names_are_distinct_snake_case_words() {
        let mut names: Vec<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        );
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Rule::ALL.len());
    }

    #[test]
    fn words_and_numbers_only_when_explaining() {
        let mut quiet = Rules::new(false);
        quiet.fire(Rule::Bounds, || "words".into(), &[("need", 3.0)]);
        assert!(quiet.fired(Rule::Bounds) && !quiet.fired(Rule::Queue));
        assert!(quiet.reasons[0].detail.is_empty() && quiet.reasons[0].values.is_empty());
        let mut loud = Rules::new(true);
        loud.fire(Rule::Bounds, || "words".into(), &[("need", 3.0)]);
        assert_eq!(loud.reasons[0].detail, "words");
        assert_eq!(loud.reasons[0].values.get("need"), Some(&3.0));
    }
}
