//! A training job as the decision core sees it, and the estimates derived from it: memory per
//! GPU for a given sharding degree, and the amount of work.
//!
//! Memory model (bytes per parameter, before sharding): weights and gradients at the training
//! precision, plus optimizer states. Mixed precision (bf16/fp16/fp8) keeps an fp32 master copy
//! with the optimizer: Adam/AdamW 12 bytes (master + two moments), SGD with momentum 8; fp32
//! training needs no master copy: Adam 8, SGD 4. So mixed-precision Adam is 2 + 2 + 12 = 16
//! bytes/param and fp32 Adam 4 + 4 + 8 = 16, as the usual ZeRO accounting has it. `none`
//! (inference-style) keeps the weights only. Activations are an explicit figure per GPU or a
//! reserve fraction of the weights' size; sharding divides model states, not activations.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    Fp32,
    Bf16,
    Fp16,
    Fp8,
}

/// Every precision, for tables kept per precision.
pub const PRECISIONS: [Precision; 4] = [
    Precision::Fp32,
    Precision::Bf16,
    Precision::Fp16,
    Precision::Fp8,
];

impl Precision {
    /// The name requests use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fp32 => "fp32",
            Self::Bf16 => "bf16",
            Self::Fp16 => "fp16",
            Self::Fp8 => "fp8",
        }
    }

    pub fn weight_bytes(self) -> f64 {
        match self {
            Self::Fp32 => 4.0,
            Self::Bf16 | Self::Fp16 => 2.0,
            Self::Fp8 => 1.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    Adam,
    Adamw,
    Sgd,
    None,
}

/// How model states are split across the data-parallel GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Sharding {
    None,
    /// ZeRO stage 1: optimizer states.
    Zero1,
    /// ZeRO stage 2: optimizer states and gradients.
    Zero2,
    /// ZeRO stage 3: optimizer states, gradients and weights.
    Zero3,
    /// PyTorch FSDP (full sharding): as ZeRO-3.
    Fsdp,
}

impl Sharding {
    /// What is split across the GPUs, in words; `None` when nothing is.
    pub fn what_is_split(self) -> Option<&'static str> {
        match self {
            Self::None => None,
            Self::Zero1 => Some("ZeRO-1 splits the optimizer states"),
            Self::Zero2 => Some("ZeRO-2 splits the optimizer states and gradients"),
            Self::Zero3 => Some("ZeRO-3 splits all model states"),
            Self::Fsdp => Some("FSDP splits all model states"),
        }
    }
}

/// Bytes per parameter of each kind of model state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct StateBytes {
    pub weights: f64,
    pub gradients: f64,
    pub optimizer: f64,
}

impl StateBytes {
    pub fn of(precision: Precision, optimizer: Optimizer) -> Self {
        let w = precision.weight_bytes();
        let mixed = precision != Precision::Fp32;
        let optimizer_bytes = match (optimizer, mixed) {
            (Optimizer::Adam | Optimizer::Adamw, true) => 12.0,
            (Optimizer::Adam | Optimizer::Adamw, false) => 8.0,
            (Optimizer::Sgd, true) => 8.0,
            (Optimizer::Sgd, false) => 4.0,
            (Optimizer::None, _) => 0.0,
        };
        let gradients = if optimizer == Optimizer::None { 0.0 } else { w };
        Self {
            weights: w,
            gradients,
            optimizer: optimizer_bytes,
        }
    }

    /// A caller-given total, attributed to weights so that only full sharding splits it.
    pub fn explicit(total: f64) -> Self {
        Self {
            weights: total,
            gradients: 0.0,
            optimizer: 0.0,
        }
    }

    pub fn total(&self) -> f64 {
        self.weights + self.gradients + self.optimizer
    }

    /// Bytes per parameter held by each GPU when `degree` GPUs share the states.
    pub fn per_gpu(&self, sharding: Sharding, degree: u32) -> f64 {
        let d = f64::from(degree.max(1));
        match sharding {
            Sharding::None => self.total(),
            Sharding::Zero1 => self.weights + self.gradients + self.optimizer / d,
            Sharding::Zero2 => self.weights + (self.gradients + self.optimizer) / d,
            Sharding::Zero3 | Sharding::Fsdp => self.total() / d,
        }
    }
}

/// What the job needs in memory per GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryNeed {
    /// The caller states it.
    Fixed { gib_per_gpu: f64 },
    /// Derived from the model.
    Model {
        params: f64,
        bytes: StateBytes,
        sharding: Sharding,
        /// Activation memory per GPU, GiB, when given.
        activation_gib: Option<f64>,
        /// Otherwise activations take this fraction of the weights' size on every GPU.
        activation_reserve: f64,
    },
}

impl MemoryNeed {
    /// Activation memory per GPU, GiB: given, or the reserve fraction of the weights' size.
    /// Activations do not shrink when model states are sharded, so this is never divided.
    pub fn activation_gib(&self) -> f64 {
        match self {
            Self::Fixed { .. } => 0.0,
            Self::Model {
                params,
                bytes,
                activation_gib,
                activation_reserve,
                ..
            } => activation_gib.unwrap_or(activation_reserve * params * bytes.weights / GIB),
        }
    }

    /// GiB per GPU when the job runs data-parallel over `degree` GPUs.
    pub fn gib_per_gpu(&self, degree: u32) -> f64 {
        match self {
            Self::Fixed { gib_per_gpu } => *gib_per_gpu,
            Self::Model {
                params,
                bytes,
                sharding,
                ..
            } => params * bytes.per_gpu(*sharding, degree) / GIB + self.activation_gib(),
        }
    }

    /// Whether the states are already split across every GPU (ZeRO-3 / FSDP).
    pub fn fully_sharded(&self) -> bool {
        matches!(
            self,
            Self::Model {
                sharding: Sharding::Zero3 | Sharding::Fsdp,
                ..
            }
        )
    }

    /// The smallest number of GPUs that fully sharded states need to fit in `gib` per GPU,
    /// or `None` when even sharding over many GPUs cannot (the activations alone are too big).
    pub fn min_fully_sharded_gpus(&self, gib: f64) -> Option<u32> {
        let Self::Model { params, bytes, .. } = self else {
            return None;
        };
        let states_gib = params * bytes.total() / GIB;
        let room = gib - self.activation_gib();
        if room <= 0.0 {
            return None;
        }
        let degree = (states_gib / room).ceil();
        (degree <= 4096.0).then_some(degree.max(1.0) as u32)
    }
}

/// The amount of work, in the unit throughput is reported in.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// `total` samples of `flops_per_sample` each. Without FLOPs per sample only measured
    /// benchmarks (samples per second) can estimate the time.
    Samples {
        total: f64,
        flops_per_sample: Option<f64>,
    },
    /// Transformer training tokens: 6 × params × tokens FLOPs.
    Tokens { tokens: f64, params: f64 },
    /// So many hours on one reference GPU at the utilisation the model gives it.
    ReferenceHours { hours: f64, gpu: String },
    /// Not given: candidates are ranked by price and throughput only.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataLayout {
    ManySmallFiles,
    LargeSequential,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Least total cost within the deadline.
    #[default]
    Cheapest,
    /// Soonest done within the budget.
    Fastest,
    /// Most throughput per unit of hourly price.
    BestValue,
}

impl Objective {
    /// What candidates are ranked by, in words.
    pub fn ranked_by(self) -> &'static str {
        match self {
            Self::Cheapest => "least estimated cost",
            Self::Fastest => "soonest done",
            Self::BestValue => "most throughput per hourly dollar",
        }
    }
}

/// A validated job profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub memory: MemoryNeed,
    pub precision: Precision,
    pub work: Work,
    pub workload: Option<String>,
    pub nodes_min: u32,
    pub nodes_max: u32,
    pub gpus_per_node_min: f64,
    pub data_layout: DataLayout,
    /// Dataset size; with many small files it must fit on the local NVMe.
    pub dataset_gib: Option<f64>,
    pub spot_allowed: bool,
    pub checkpoint_interval_min: Option<f64>,
    pub restart_overhead_min: f64,
    pub providers: Vec<String>,
    pub regions: Vec<String>,
    pub zones: Vec<String>,
    pub gpus: Vec<String>,
    pub exclude_gpus: Vec<String>,
    pub max_price_per_hour: Option<f64>,
    pub deadline_hours: Option<f64>,
    pub budget: Option<f64>,
    /// Multi-node jobs need EFA/InfiniBand/RoCE of at least 100 Gbit/s unless waived.
    pub require_fast_interconnect: bool,
    pub objective: Objective,
    pub top_k: usize,
    /// Share of datasheet dense TFLOPS one GPU reaches, when the job states it; otherwise
    /// the calibrated model of [`super::estimate`] gives it per configuration.
    pub utilisation: Option<f64>,
    /// Minutes from launch to a training node, when the job states it; otherwise the
    /// provider's default ([`super::terms::default_startup_min`]).
    pub startup_min: Option<f64>,
}

/// Where the model size the utilisation depends on came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SizeFrom {
    /// `params_billion`.
    Given,
    /// Derived from `gpu_memory_gib_min` at 16 bytes per parameter (mixed-precision Adam).
    Memory,
    /// Neither was given: a 1-billion-parameter model is assumed.
    Assumed,
}

/// The model size assumed when a job states neither its parameters nor its memory.
pub const ASSUMED_PARAMS: f64 = 1e9;
/// Bytes per parameter used to turn a stated memory need into a model size.
pub const BYTES_PER_PARAM_FOR_SIZE: f64 = 16.0;

/// CUDA context and library workspaces (cuBLAS, cuDNN, NCCL) held on every GPU before the
/// job's own tensors, GiB.
pub const CUDA_CONTEXT_GIB: f64 = 1.0;
/// Share of a GPU's memory the caching allocator loses to fragmentation.
pub const ALLOCATOR_OVERHEAD: f64 = 0.05;

/// The memory of a GPU of `gpu_memory_gib` that the job's tensors can use: less the CUDA
/// context and the allocator's overhead.
pub fn usable_gib(gpu_memory_gib: f64) -> f64 {
    (gpu_memory_gib * (1.0 - ALLOCATOR_OVERHEAD) - CUDA_CONTEXT_GIB).max(0.0)
}
/// Activation reserve on top of model states when the request gives neither figure.
pub const DEFAULT_ACTIVATION_RESERVE: f64 = 0.2;
/// Minutes to resume from a checkpoint after an interruption, when not given.
pub const DEFAULT_RESTART_OVERHEAD_MIN: f64 = 5.0;

impl Default for Job {
    /// The request defaults: no memory need, bf16, no stated work, one node, any GPU count,
    /// sequential data, spot allowed (it still needs checkpointing), cheapest first, top 5.
    fn default() -> Self {
        Self {
            memory: MemoryNeed::Fixed { gib_per_gpu: 0.0 },
            precision: Precision::Bf16,
            work: Work::Unknown,
            workload: None,
            nodes_min: 1,
            nodes_max: 1,
            gpus_per_node_min: 0.0,
            data_layout: DataLayout::LargeSequential,
            dataset_gib: None,
            spot_allowed: true,
            checkpoint_interval_min: None,
            restart_overhead_min: DEFAULT_RESTART_OVERHEAD_MIN,
            providers: Vec::new(),
            regions: Vec::new(),
            zones: Vec::new(),
            gpus: Vec::new(),
            exclude_gpus: Vec::new(),
            max_price_per_hour: None,
            deadline_hours: None,
            budget: None,
            require_fast_interconnect: true,
            objective: Objective::Cheapest,
            top_k: 5,
            utilisation: None,
            startup_min: None,
        }
    }
}

impl Job {
    /// The model size the utilisation model reads, and where it came from.
    pub fn model_size(&self) -> (f64, SizeFrom) {
        match (&self.memory, &self.work) {
            (MemoryNeed::Model { params, .. }, _) | (_, Work::Tokens { params, .. }) => {
                (*params, SizeFrom::Given)
            }
            (MemoryNeed::Fixed { gib_per_gpu }, _) if *gib_per_gpu > 0.0 => (
                (gib_per_gpu * GIB / BYTES_PER_PARAM_FOR_SIZE).max(1e6),
                SizeFrom::Memory,
            ),
            _ => (ASSUMED_PARAMS, SizeFrom::Assumed),
        }
    }

    /// Whether more nodes than needed may be considered: only to finish sooner.
    pub fn spreads_for_speed(&self) -> bool {
        self.objective == Objective::Fastest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_precision_adam_is_sixteen_bytes_per_parameter() {
        assert_eq!(
            StateBytes::of(Precision::Bf16, Optimizer::Adamw).total(),
            16.0
        );
        assert_eq!(
            StateBytes::of(Precision::Fp32, Optimizer::Adam).total(),
            16.0
        );
        assert_eq!(
            StateBytes::of(Precision::Bf16, Optimizer::Sgd).total(),
            12.0
        );
        assert_eq!(
            StateBytes::of(Precision::Bf16, Optimizer::None).total(),
            2.0
        );
    }

    #[test]
    fn the_usable_memory_leaves_the_cuda_context_and_the_allocator_overhead() {
        // 80 GiB × 0.95 - 1 GiB = 75 GiB; 16 GiB × 0.95 - 1 = 14.2 GiB.
        assert_eq!(usable_gib(80.0), 75.0);
        assert!((usable_gib(16.0) - 14.2).abs() < 1e-12);
        assert_eq!(usable_gib(0.5), 0.0);
    }

    #[test]
    fn the_model_size_comes_from_params_then_memory_then_an_assumption() {
        let given = Job {
            memory: MemoryNeed::Model {
                params: 2.5e7,
                bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
                sharding: Sharding::None,
                activation_gib: None,
                activation_reserve: 0.2,
            },
            ..Job::default()
        };
        assert_eq!(given.model_size(), (2.5e7, SizeFrom::Given));
        let memory = Job {
            memory: MemoryNeed::Fixed { gib_per_gpu: 16.0 },
            ..Job::default()
        };
        // 16 GiB at 16 bytes per parameter: 2^30 parameters.
        assert_eq!(memory.model_size(), (GIB, SizeFrom::Memory));
        assert_eq!(Job::default().model_size(), (1e9, SizeFrom::Assumed));
    }

    #[test]
    fn sharding_divides_the_right_states() {
        let b = StateBytes::of(Precision::Bf16, Optimizer::Adam);
        assert_eq!(b.per_gpu(Sharding::None, 8), 16.0);
        assert_eq!(b.per_gpu(Sharding::Zero1, 8), 2.0 + 2.0 + 12.0 / 8.0);
        assert_eq!(b.per_gpu(Sharding::Zero2, 8), 2.0 + 14.0 / 8.0);
        assert_eq!(b.per_gpu(Sharding::Fsdp, 8), 2.0);
    }

    #[test]
    fn a_7b_adamw_job_needs_107_gib_unsharded_and_15_6_with_fsdp_over_8() {
        let need = MemoryNeed::Model {
            params: 7e9,
            bytes: StateBytes::of(Precision::Bf16, Optimizer::Adamw),
            sharding: Sharding::Fsdp,
            activation_gib: None,
            activation_reserve: 0.2,
        };
        // 7e9 × 16 B = 104.31 GiB of states, plus activations of 20 % of the 13.04 GiB of
        // bf16 weights (2.61 GiB), which sharding does not divide.
        let close = |a: f64, b: f64| (a - b).abs() < 0.01;
        assert!(
            close(need.gib_per_gpu(1), 106.92),
            "{}",
            need.gib_per_gpu(1)
        );
        assert!(close(need.gib_per_gpu(8), 15.65), "{}", need.gib_per_gpu(8));
        assert!(
            close(need.gib_per_gpu(64), 104.31 / 64.0 + 2.61),
            "{}",
            need.gib_per_gpu(64)
        );
        // On 80 GiB GPUs: ceil(104.31 / (80 - 2.61)) = 2.
        assert_eq!(need.min_fully_sharded_gpus(80.0), Some(2));
    }
}
