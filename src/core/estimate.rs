//! How fast a configuration trains when nothing was measured: the GPUs' datasheet dense
//! TFLOPS at the job's precision times a utilisation that depends on the model's size, the
//! GPU, the precision and how many GPUs and nodes share the work.
//!
//! The model has three parts, each with a physical reason:
//!
//! - **Ceiling.** What a large model reaches on one GPU. It falls as a GPU's compute grows
//!   faster than its memory bandwidth (its ridge point, FLOPs per byte): the bandwidth-bound
//!   parts of a step (normalisation, activations, optimizer) take a larger share of the time.
//!   `ceiling = 0.55 × (153 / ridge)^0.4`, at most 0.9; 153 is the A100 80GB's ridge.
//! - **Fill.** Small models do not keep a large GPU busy: kernels are too small to fill its
//!   streaming multiprocessors and launch overheads dominate. `fill = 1 + 0.3 × log10(params
//!   / full_size)`, between 0.05 and 1, where `full_size = 3e9 × sqrt(peak / 312 TFLOPS)`:
//!   a larger GPU needs a larger model to fill.
//! - **Scaling.** Each doubling of the GPU count loses `0.06 × (1 - fill)` (small models'
//!   steps are too short to hide the all-reduce); each doubling of the node count loses what
//!   the fabric costs (1 % on EFA, InfiniBand and RoCE, 5 % on GPUDirect-TCPX, 40 % on plain
//!   Ethernet); GPUs without NVLink in one node lose 10 % to PCIe all-reduce.
//!
//! The constants are fitted to the published results in `catalog/calibration.csv` (MosaicML
//! llm-foundry, Megatron-LM, Llama 3 and NVIDIA's DeepLearningExamples), and a test holds the
//! estimate within ±25 % of every row. Utilisation here counts model FLOPs (6 × parameters
//! per token for transformers, or the job's FLOPs per sample), not recomputation.

use super::catalog::{GpuFacts, Interconnect};
use super::job::Precision;

/// A large model's utilisation on the reference GPU (A100 80GB), fitted.
pub const CEILING_AT_REFERENCE: f64 = 0.55;
/// The reference GPU's ridge point: 312 TFLOPS over 2.039 TB/s, FLOPs per byte.
pub const REFERENCE_RIDGE: f64 = 153.0;
pub const RIDGE_EXPONENT: f64 = 0.4;
/// No training step reaches the datasheet peak.
pub const CEILING_CAP: f64 = 0.9;
/// The model size that fills the reference GPU (312 TFLOPS), parameters.
pub const FULL_SIZE_AT_REFERENCE: f64 = 3e9;
pub const REFERENCE_TFLOPS: f64 = 312.0;
/// Fill lost per decade of model size below the full size.
pub const FILL_PER_DECADE: f64 = 0.3;
pub const MIN_FILL: f64 = 0.05;
/// Efficiency lost per doubling of the GPU count, times the share of the GPU left unfilled.
pub const SMALL_MODEL_LOSS_PER_DOUBLING: f64 = 0.06;
/// Efficiency per doubling of nodes, by fabric. The fast-fabric figure is fitted (llm-foundry
/// at 8 to 128 GPUs, Megatron-LM at 96 to 4608, Llama 3 at 16,384); the others are assumed.
pub const FAST_FABRIC_EFFICIENCY: f64 = 0.99;
pub const TCPX_EFFICIENCY: f64 = 0.95;
pub const ETHERNET_EFFICIENCY: f64 = 0.6;
/// Within a node, GPUs without NVLink lose some of their speed to PCIe all-reduce (assumed).
pub const PCIE_MULTI_GPU_EFFICIENCY: f64 = 0.9;
/// Where the figures come from, for the answers' assumptions.
pub const SOURCE: &str = "fitted to the published training results in catalog/calibration.csv \
     (MosaicML llm-foundry, Megatron-LM, Llama 3, NVIDIA DeepLearningExamples)";

/// Per-GPU dense throughput at `precision`, TFLOPS; `None` for bf16 on GPUs without it.
pub fn gpu_tflops(facts: &GpuFacts, precision: Precision) -> Option<f64> {
    match precision {
        Precision::Fp32 => Some(facts.fp32_tflops),
        Precision::Bf16 if !facts.bf16_supported => None,
        // FP8 is counted at the 16-bit rate: a conservative floor where FP8 tensor cores exist.
        Precision::Bf16 | Precision::Fp16 | Precision::Fp8 => Some(facts.fp16_bf16_dense_tflops),
    }
}

/// Efficiency per doubling of nodes on a fabric.
pub fn fabric_per_doubling(interconnect: Interconnect) -> f64 {
    match interconnect {
        Interconnect::Efa | Interconnect::Infiniband | Interconnect::Roce => FAST_FABRIC_EFFICIENCY,
        Interconnect::GpudirectTcpx => TCPX_EFFICIENCY,
        Interconnect::None => ETHERNET_EFFICIENCY,
    }
}

/// Where a configuration runs, as the estimate needs it.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    pub facts: &'a GpuFacts,
    pub precision: Precision,
    pub gpus_per_node: u32,
    pub nodes: u32,
    pub interconnect: Interconnect,
}

/// The estimate for one configuration, with its parts for the reasons.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Datasheet dense TFLOPS of one GPU at the precision.
    pub peak_tflops: f64,
    /// Share of the peak one GPU reaches: ceiling × fill, or the job's override.
    pub utilisation: f64,
    pub ceiling: f64,
    pub fill: f64,
    /// GPU-count, PCIe and fabric losses together (1.0 on one GPU).
    pub scaling: f64,
    /// Whether `utilisation` is the job's own figure.
    pub overridden: bool,
}

impl Estimate {
    /// Model TFLOPS of the whole configuration.
    pub fn effective_tflops(&self, gpus: f64) -> f64 {
        self.peak_tflops * self.utilisation * self.scaling * gpus
    }

    /// What all GPUs reach together, as a share of their peak.
    pub fn overall(&self) -> f64 {
        self.utilisation * self.scaling
    }
}

/// A factor lost per doubling, compounded over the doublings from one to `count`.
fn compounded(per_doubling: f64, count: f64) -> f64 {
    // x^0 is exactly 1 for every x: one node or one GPU needs no `powf`, which is most of
    // an estimate's time.
    if count <= 1.0 {
        1.0
    } else {
        per_doubling.powf(count.log2())
    }
}

/// What the estimate takes from a GPU's datasheet alone at one precision: its peak, the
/// ceiling its ridge point allows and the model size that fills it. None of it depends on
/// the job, so a catalog snapshot works it out once per GPU model and precision
/// ([`CatalogSnapshot::roofline_of`](super::catalog::CatalogSnapshot::roofline_of)): it is
/// most of an estimate's arithmetic (a `powf` and a square root).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Roofline {
    pub peak_tflops: f64,
    pub ceiling: f64,
    pub full_size: f64,
}

impl Roofline {
    /// `None` when the GPU cannot train at the precision.
    pub fn of(facts: &GpuFacts, precision: Precision) -> Option<Self> {
        let peak = gpu_tflops(facts, precision)?;
        if peak.is_nan() || peak <= 0.0 {
            return None;
        }
        let bandwidth_tb = facts.memory_bandwidth_gbps / 1000.0;
        let ridge = if bandwidth_tb > 0.0 {
            peak / bandwidth_tb
        } else {
            REFERENCE_RIDGE
        };
        let ceiling = (CEILING_AT_REFERENCE * (REFERENCE_RIDGE / ridge).powf(RIDGE_EXPONENT))
            .min(CEILING_CAP);
        let full_size = FULL_SIZE_AT_REFERENCE * (peak / REFERENCE_TFLOPS).sqrt();
        Some(Self {
            peak_tflops: peak,
            ceiling,
            full_size,
        })
    }
}

/// The estimate for a model of `params` parameters; `override_utilisation` replaces the
/// per-GPU figure (scaling across GPUs and nodes still applies). `None` when the GPU cannot
/// train at the precision.
pub fn estimate(
    params: f64,
    setup: Setup<'_>,
    override_utilisation: Option<f64>,
) -> Option<Estimate> {
    let roofline = Roofline::of(setup.facts, setup.precision)?;
    Some(estimate_on(roofline, params, setup, override_utilisation))
}

/// [`estimate`] with the GPU's [`Roofline`] at the setup's precision already worked out.
pub fn estimate_on(
    roofline: Roofline,
    params: f64,
    setup: Setup<'_>,
    override_utilisation: Option<f64>,
) -> Estimate {
    let Roofline {
        peak_tflops,
        ceiling,
        full_size,
    } = roofline;
    let fill = (1.0 + FILL_PER_DECADE * (params.max(1.0) / full_size).log10()).clamp(MIN_FILL, 1.0);
    let gpus = f64::from(setup.gpus_per_node.max(1)) * f64::from(setup.nodes.max(1));
    let per_gpu_doubling = 1.0 - SMALL_MODEL_LOSS_PER_DOUBLING * (1.0 - fill);
    let intra = if setup.gpus_per_node > 1 && setup.facts.gpu_link_gbps <= 0.0 {
        PCIE_MULTI_GPU_EFFICIENCY
    } else {
        1.0
    };
    let fabric = compounded(
        fabric_per_doubling(setup.interconnect),
        f64::from(setup.nodes.max(1)),
    );
    let scaling = compounded(per_gpu_doubling, gpus) * intra * fabric;
    let (utilisation, overridden) = match override_utilisation {
        Some(u) => (u, true),
        None => (ceiling * fill, false),
    };
    Estimate {
        peak_tflops,
        utilisation,
        ceiling,
        fill,
        scaling,
        overridden,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(name: &str, tflops: f64, bandwidth: f64, link: f64) -> GpuFacts {
        GpuFacts {
            name: name.into(),
            variant: String::new(),
            memory_gib: 80.0,
            memory_bandwidth_gbps: bandwidth,
            fp16_bf16_dense_tflops: tflops,
            bf16_supported: true,
            fp32_tflops: tflops / 16.0,
            gpu_link_gbps: link,
            tdp_w: 400.0,
        }
    }

    fn setup(f: &GpuFacts, gpus: u32, nodes: u32) -> Setup<'_> {
        Setup {
            facts: f,
            precision: Precision::Bf16,
            gpus_per_node: gpus,
            nodes,
            interconnect: Interconnect::Efa,
        }
    }

    #[test]
    fn a_large_model_on_the_reference_gpu_reaches_the_reference_ceiling() {
        // 312 TFLOPS over 2.04 TB/s is the reference ridge of 153 FLOPs per byte.
        let a100 = facts("A100-80GB", 312.0, 312.0 / 153.0 * 1000.0, 600.0);
        let e = estimate(7e9, setup(&a100, 1, 1), None).unwrap();
        assert!((e.ceiling - 0.55).abs() < 1e-12);
        assert_eq!(e.fill, 1.0, "7e9 is above the 3e9 that fills it");
        assert_eq!(e.scaling, 1.0);
        assert!((e.effective_tflops(1.0) - 312.0 * 0.55).abs() < 1e-9);
    }

    #[test]
    fn a_small_model_fills_a_fraction_and_loses_per_doubling() {
        let a100 = GpuFacts {
            memory_bandwidth_gbps: 312.0 / 153.0 * 1000.0,
            ..facts("A100-80GB", 312.0, 0.0, 600.0)
        };
        // 30 M parameters: two decades below 3e9, fill 1 - 0.3 × 2 = 0.4; across 8 GPUs each
        // doubling keeps 1 - 0.06 × 0.6 = 0.964.
        let e = estimate(3e7, setup(&a100, 8, 1), None).unwrap();
        assert!((e.fill - 0.4).abs() < 1e-12, "{e:?}");
        assert!((e.utilisation - 0.22).abs() < 1e-12, "{e:?}");
        assert!((e.scaling - 0.964f64.powi(3)).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn a_larger_gpu_needs_a_larger_model_and_its_ridge_lowers_the_ceiling() {
        // 4 × the reference TFLOPS at 2 × its bandwidth: ridge 306, ceiling 0.55 × 0.5^0.4;
        // full size 3e9 × 2 = 6e9.
        let big = GpuFacts {
            memory_bandwidth_gbps: 2.0 * 312.0 / 153.0 * 1000.0,
            ..facts("BIG", 4.0 * 312.0, 0.0, 900.0)
        };
        let e = estimate(6e8, setup(&big, 1, 1), None).unwrap();
        assert!((e.ceiling - 0.55 * 0.5f64.powf(0.4)).abs() < 1e-12);
        assert!((e.fill - 0.7).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn nodes_pay_the_fabric_and_pcie_gpus_pay_the_bus() {
        let l4 = facts("L4", 121.0, 300.0, 0.0);
        let mut s = setup(&l4, 4, 4);
        s.interconnect = Interconnect::None;
        let e = estimate(1e12, s, None).unwrap();
        // Fill 1 (a huge model): no small-model loss; 0.9 for PCIe, 0.6² for two doublings
        // of nodes on Ethernet.
        assert!((e.scaling - 0.9 * 0.36).abs() < 1e-12, "{e:?}");
    }

    #[test]
    fn an_override_replaces_the_per_gpu_figure_but_not_the_scaling() {
        let h100 = facts("H100", 989.0, 3350.0, 900.0);
        let e = estimate(1e8, setup(&h100, 8, 2), Some(0.5)).unwrap();
        let modelled = estimate(1e8, setup(&h100, 8, 2), None).unwrap();
        assert!(e.overridden && e.utilisation == 0.5);
        assert_eq!(e.scaling, modelled.scaling);
    }

    #[test]
    fn bf16_on_a_gpu_without_it_has_no_estimate() {
        let t4 = GpuFacts {
            bf16_supported: false,
            ..facts("T4", 65.0, 320.0, 0.0)
        };
        assert!(estimate(1e8, setup(&t4, 1, 1), None).is_none());
        let fp16 = Setup {
            precision: Precision::Fp16,
            ..setup(&t4, 1, 1)
        };
        assert!(estimate(1e8, fp16, None).is_some());
    }

    #[test]
    fn the_snapshot_keeps_each_gpus_roofline_and_each_shapes_terms() {
        use crate::core::catalog::CatalogSnapshot;
        use crate::core::job::PRECISIONS;
        use crate::core::terms::Terms;
        use crate::core::test_support::p4d;

        let h100 = facts("H100", 989.0, 3350.0, 900.0);
        let t4 = GpuFacts {
            bf16_supported: false,
            ..facts("T4", 65.0, 320.0, 0.0)
        };
        let offering = |id: i64, provider: &str, gpu: &str| {
            p4d()
                .id(id)
                .at(provider, "r1")
                .instance_type(&format!("{gpu}-box"))
                .gpus(gpu, 8.0, 80.0)
                .build()
        };
        let catalog = CatalogSnapshot::new(
            Vec::new(),
            vec![h100.clone(), t4.clone()],
            vec![
                offering(1, "aws", "H100"),
                offering(2, "lambda", "t4"),
                offering(3, "vast", "L4"),
            ],
        );
        for p in PRECISIONS {
            assert_eq!(catalog.roofline_of(0, p), Roofline::of(&h100, p));
            assert!(catalog.roofline_of(0, p).is_some());
            // Matched case-insensitively, like the rest of the snapshot's GPU lookups.
            assert_eq!(catalog.roofline_of(1, p), Roofline::of(&t4, p));
            assert_eq!(catalog.roofline_of(2, p), None, "no facts for L4");
        }
        assert_eq!(catalog.roofline_of(1, Precision::Bf16), None);
        assert!(catalog.roofline_of(1, Precision::Fp16).is_some());
        assert_eq!(catalog.roofline_of(99, Precision::Fp16), None);
        // The kept roofline gives the estimate to the bit.
        let roofline = catalog
            .roofline_of(0, Precision::Bf16)
            .expect("H100 trains in bf16");
        for (gpus, nodes) in [(1, 1), (8, 1), (8, 4)] {
            assert_eq!(
                Some(estimate_on(roofline, 7e9, setup(&h100, gpus, nodes), None)),
                estimate(7e9, setup(&h100, gpus, nodes), None)
            );
        }
        assert_eq!(catalog.terms_of(0), Terms::for_provider("aws"));
        assert_eq!(catalog.terms_of(1), Terms::for_provider("lambda"));
        assert_ne!(catalog.terms_of(1), catalog.terms_of(2));
    }
}
