//! Offerings grouped by shape: one provider's instance type with one spec, sold in many
//! regions and zones. Whatever depends only on the machine (which GPUs, how much memory,
//! which fabric, how fast it trains a given job) is the same for every offering of a shape,
//! so instance selection works it out once per shape instead of once per offering. Built
//! once per catalog snapshot, with the snapshot.

use std::collections::HashMap;

use super::catalog::Offering;

/// The shape of every offering of a catalog, and one offering standing for each shape.
#[derive(Debug, Default)]
pub struct Shapes {
    /// For each offering (by position), its shape.
    of: Vec<u32>,
    /// For each shape, the position of its first offering.
    first: Vec<u32>,
    /// The positions of every shape's offerings, shape by shape, each run ascending.
    members: Vec<u32>,
    /// Where each shape's run starts in `members`, and one past the last run's end.
    member_start: Vec<u32>,
}

impl Shapes {
    /// Groups `offerings` by provider, instance type and spec. Offerings of one instance type
    /// whose specs differ (an import may disagree with itself) get shapes of their own.
    pub fn build(offerings: &[Offering]) -> Self {
        let mut by_type: HashMap<(&str, &str), Vec<u32>> = HashMap::new();
        let mut of = Vec::with_capacity(offerings.len());
        let mut first: Vec<u32> = Vec::new();
        for (position, o) in offerings.iter().enumerate() {
            let shapes = by_type
                .entry((o.key.provider.as_str(), o.key.instance_type.as_str()))
                .or_default();
            let same = shapes
                .iter()
                .copied()
                .find(|&s| offerings[first[s as usize] as usize].spec == o.spec);
            let shape = same.unwrap_or_else(|| {
                let s = first.len() as u32;
                first.push(position as u32);
                shapes.push(s);
                s
            });
            of.push(shape);
        }
        let mut member_start = vec![0u32; first.len() + 1];
        for &shape in &of {
            member_start[shape as usize + 1] += 1;
        }
        for s in 1..member_start.len() {
            member_start[s] += member_start[s - 1];
        }
        let mut next = member_start.clone();
        let mut members = vec![0u32; of.len()];
        for (position, &shape) in of.iter().enumerate() {
            members[next[shape as usize] as usize] = position as u32;
            next[shape as usize] += 1;
        }
        Self {
            of,
            first,
            members,
            member_start,
        }
    }

    /// How many shapes there are.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// The shape of the offering at `position`.
    pub fn of(&self, position: usize) -> usize {
        self.of[position] as usize
    }

    /// The position of the first offering of `shape`.
    pub fn first(&self, shape: usize) -> usize {
        self.first[shape] as usize
    }

    /// The positions of the offerings of `shape`, ascending. Shapes are numbered in the order
    /// of their first offering, so visiting shapes in number order meets them as a scan in
    /// offering order would.
    pub fn members(&self, shape: usize) -> &[u32] {
        &self.members[self.member_start[shape] as usize..self.member_start[shape + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::test_support::p4d;

    fn offering(instance_type: &str, region: &str, gpu_memory_gib: f64) -> Offering {
        p4d()
            .id(0)
            .at("aws", region)
            .instance_type(instance_type)
            .gpus("A100", 8.0, gpu_memory_gib)
            .build()
    }

    #[test]
    fn one_instance_type_in_many_regions_is_one_shape() {
        let shapes = Shapes::build(&[
            offering("p4d.24xlarge", "us-east-1", 40.0),
            offering("p4de.24xlarge", "us-east-1", 80.0),
            offering("p4d.24xlarge", "eu-west-1", 40.0),
        ]);
        assert_eq!(shapes.len(), 2);
        assert_eq!(shapes.of(0), shapes.of(2));
        assert_ne!(shapes.of(0), shapes.of(1));
        assert_eq!(shapes.first(shapes.of(2)), 0);
        assert_eq!(shapes.first(shapes.of(1)), 1);
        assert_eq!(shapes.members(shapes.of(0)), [0, 2]);
        assert_eq!(shapes.members(shapes.of(1)), [1]);
    }

    #[test]
    fn an_instance_type_whose_spec_differs_by_region_gets_two_shapes() {
        let shapes = Shapes::build(&[
            offering("p4d.24xlarge", "us-east-1", 40.0),
            offering("p4d.24xlarge", "eu-west-1", 80.0),
        ]);
        assert_eq!(shapes.len(), 2);
        assert_eq!(shapes.first(shapes.of(1)), 1);
    }
}
