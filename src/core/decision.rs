//! What instance selection answers: ranked candidates with their numbers and reasons, the
//! derived job profile, rejections counted by reason, and the assumptions behind estimates.

use serde::Serialize;
use utoipa::ToSchema;

use super::catalog::Market;
use super::job::SizeFrom;

/// Why a configuration (offering × node count × market) was not a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// Outside the request's providers, regions, zones or GPU lists.
    FilteredByConstraint,
    /// Fewer GPUs per node than `gpus_per_node_min`.
    TooFewGpusPerNode,
    /// A slice of a GPU (Azure's fractional A10 sizes): training needs whole GPUs.
    FractionalGpu,
    /// The job's memory per GPU exceeds the GPU's.
    MemoryDoesNotFit,
    /// More nodes where the job already fits on one: they would only add communication.
    SingleNodeSuffices,
    /// Multi-node without EFA, InfiniBand, RoCE or GPUDirect-TCPX of at least 100 Gbit/s.
    NoFastInterconnect,
    /// Many-small-files data without documented local NVMe, or with less than the dataset.
    NoLocalNvme,
    /// bf16 requested on a GPU without bf16 tensor cores.
    PrecisionUnsupported,
    /// The job states its work, but there is no benchmark and no datasheet figure for the
    /// GPU to estimate the time from.
    NoThroughputData,
    /// Spot not allowed, or the job does not checkpoint.
    SpotNotAllowed,
    /// No price in this market.
    NoPrice,
    /// Total hourly price above `max_price_per_hour`.
    OverPriceCap,
    /// Estimated hours above `deadline_hours`.
    MissesDeadline,
    /// Estimated cost above `budget`.
    OverBudget,
}

/// How many configurations were rejected for one reason, with a few examples.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Rejections {
    pub reason: RejectReason,
    pub count: u64,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThroughputSource {
    Benchmark,
    Datasheet,
    /// No datasheet facts and no benchmark for the GPU: ranked by price only (a job that
    /// states no work).
    Unknown,
}

/// One ranked way to run the job.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Candidate {
    pub rank: usize,
    pub offering_id: i64,
    pub provider: String,
    pub region: String,
    pub zone: Option<String>,
    pub instance_type: String,
    pub gpu: String,
    pub gpus_per_node: f64,
    pub nodes: u32,
    pub market: Market,
    /// USD per node-hour.
    pub price_per_hour: f64,
    /// USD per hour for all nodes.
    pub price_per_hour_total: f64,
    /// Work per second across all nodes, in `throughput_unit`; null when the GPU has no
    /// datasheet facts or benchmark.
    pub throughput: Option<f64>,
    /// `samples_per_sec`, `tokens_per_sec`, `reference_gpus` or `effective_tflops`.
    pub throughput_unit: &'static str,
    pub throughput_source: ThroughputSource,
    /// Share of the GPUs' datasheet TFLOPS the estimate assumes one GPU reaches; null for
    /// measured throughput.
    pub utilisation: Option<f64>,
    /// Losses from spreading the work over this many GPUs and nodes (1.0 on one GPU); for
    /// measured throughput, the efficiency against the smallest measured GPU count.
    pub scaling_efficiency: Option<f64>,
    /// Minutes from launch to training, paid for and counted in `est_hours`.
    pub startup_min: f64,
    /// Hours from launch to done: start-up plus the run (stretched by spot interruptions).
    /// Null when the request gives no amount of work.
    pub est_hours: Option<f64>,
    /// Hours each node is billed: `est_hours` rounded up to the provider's increment, at
    /// least its minimum.
    pub billed_hours: Option<f64>,
    /// `billed_hours × price_per_hour_total`.
    pub est_cost: Option<f64>,
    pub expected_interruptions: f64,
    /// Throughput per USD of hourly price; null when the throughput is unknown.
    pub value: Option<f64>,
    pub memory_needed_gib: f64,
    /// Memory per GPU the job may use: the GPU's, less the CUDA context and allocator
    /// overhead (see `assumptions.memory_reserve`).
    pub memory_usable_gib: f64,
    /// `memory_usable_gib - memory_needed_gib`.
    pub memory_headroom_gib: f64,
    pub reasons: Vec<String>,
}

/// What the job needs, derived from the request, with the inputs of each formula.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Profile {
    /// Memory per GPU on a single GPU (no sharding degree), GiB.
    pub memory_per_gpu_gib_single: f64,
    /// How the figure was reached.
    pub memory_formula: String,
    /// `memory` when the memory need rejected most configurations, else `compute`.
    pub bound: &'static str,
    /// Runs on more than one node.
    pub distributed: bool,
    pub io_sensitive: bool,
    /// Total training work in FLOPs, when known.
    pub total_flops: Option<f64>,
}

/// The smallest change that would let a job that fits nowhere run.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Suggestion {
    pub change: String,
    pub detail: String,
}

/// How the utilisation behind datasheet estimates was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct UtilisationAssumption {
    /// The rule, in words.
    pub rule: String,
    /// Where its constants come from.
    pub source: String,
    /// The job's own figure, when it gave one: it replaces the modelled per-GPU figure.
    pub job_override: Option<f64>,
    /// The model size the rule read, parameters.
    pub model_params: f64,
    /// `given` (params_billion), `memory` (from gpu_memory_gib_min) or `assumed`.
    pub model_params_from: SizeFrom,
    /// The lowest and highest per-GPU utilisation among the candidates returned.
    pub range: Option<[f64; 2]>,
}

/// Memory every GPU holds back before the job's tensors.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MemoryReserve {
    /// CUDA context and library workspaces, GiB per GPU.
    pub cuda_context_gib: f64,
    /// Share of the GPU's memory lost to the caching allocator's fragmentation.
    pub allocator_overhead: f64,
}

/// Start-up and billing of one provider among the candidates.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ProviderTerms {
    pub provider: String,
    /// Minutes from launch to training (boot and image pull), paid for.
    pub startup_min: f64,
    /// `job` when the request set `startup_min`, else `provider_default` (assumed).
    pub startup_from: &'static str,
    /// Run time is billed in whole increments of this many seconds...
    pub billing_increment_sec: f64,
    /// ...and at least this long.
    pub billing_minimum_sec: f64,
}

/// The numbers every estimate rests on.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Assumptions {
    pub utilisation: UtilisationAssumption,
    /// Scaling efficiency by number of nodes on a fast fabric: efficiency^(log2 nodes).
    pub fast_fabric_efficiency_per_doubling: f64,
    pub tcpx_efficiency_per_doubling: f64,
    pub ethernet_efficiency_per_doubling: f64,
    /// Within one node across PCIe-only GPUs.
    pub pcie_multi_gpu_efficiency: f64,
    /// Per doubling of the GPU count, a model that fills a share `fill` of each GPU keeps
    /// `1 - this × (1 - fill)`.
    pub small_model_loss_per_doubling: f64,
    pub memory_reserve: MemoryReserve,
    /// Start-up and billing of each provider among the candidates.
    pub providers: Vec<ProviderTerms>,
    /// Interruption rates: where each came from.
    pub interruption_rates: Vec<String>,
    pub restart_overhead_min: f64,
    /// What one spot interruption costs, in words.
    pub spot_loss: String,
}

/// The answer to "which instance for this job".
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct InstanceDecision {
    pub candidates: Vec<Candidate>,
    /// Configurations considered (offering × node count × market).
    pub considered: u64,
    /// Configurations that passed every filter, before `top_k`.
    pub feasible: u64,
    pub profile: Profile,
    pub rejected: Vec<Rejections>,
    pub suggestions: Vec<Suggestion>,
    pub assumptions: Assumptions,
}
