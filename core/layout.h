// Layout: how one training job is spread over GPUs, and its one-line string form.
//
//   tp=8,pp=4,dp=16,cp=1,ep=1,etp=1,vpp=2,schedule=interleaved,sp=on,mbs=1,gbs=1024,zero=1,
//   recompute=selective,dtype=bf16[,moments=bf16,act_cache=fp8]
//
// The string names a layout everywhere: CLI, plan files, validation records, traces (DESIGN.md,
// "Layout string"). `parse_layout` reads it (unknown keys and malformed values are errors naming
// the key); keys left out stay unset and take their documented defaults when `resolve_layout`
// checks the layout against a model and a GPU count. `format_layout` writes the canonical form;
// parse(format(l)) == l for every layout.
//
// The expert grid is separate from the dense grid, as in Megatron-LM: the tp·cp·dp ranks of one
// pipeline stage are re-divided into etp·ep·edp for the expert layers, so ep·etp must divide
// tp·cp·dp. Layers need not divide by pp·vpp: `stage_layer_counts` spreads them, and `pp_first` /
// `pp_last` pin the first and last stages' layer counts (Megatron's
// --decoder-first/last-pipeline-num-layers), or `pp_embedding` / `pp_loss` count the embedding and
// the LM head with its loss as one layer each of the split (Megatron-core's
// --account-for-embedding/loss-in-pipeline-split), so that pp·vpp may exceed the layers by two.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace scaleplan {

enum class Schedule { kAfab, k1F1B, kInterleaved, kZbH1, kDualPipe, kDualPipeV, kZbV };
enum class Recompute { kNone, kSelective, kFull };
// A layout's dtype is kBf16 or kFp8 (the low-precision linears, whichever recipe quantizes them).
// kFp4 is only a GEMM operand dtype: the e2m1 GEMMs of Transformer Engine's NVFP4 recipe
// (models::Fp8Recipe::kNvfp4 rewrites the fp8 linears' GEMMs to it); parse_dtype rejects "fp4".
enum class DType { kBf16, kFp8, kFp4 };
// The dtype of Adam's moments m and v; the fp32 master weights stay fp32 either way. kBf16 is
// Megatron-core's precision-aware optimizer (--use-precision-aware-optimizer --exp-avg-dtype bf16
// --exp-avg-sq-dtype bf16) and DeepSeek-V3's run ("We adopt the BF16 data format instead of FP32
// to track the first and second moments in the AdamW optimizer", technical report §3.3.3).
enum class MomentDtype : uint8_t { kFp32, kBf16 };
// What the activations kept for the backward are cached in under dtype=fp8. kDefault: what the
// framework's fp8 linears keep (Transformer Engine: each decoder linear its fp8 input copy, the
// rest bf16). kFp8: DeepSeek-V3's fine-grained caching (technical report §3.3.2-3.3.3): every
// linear's input in fp8 with one fp32 scale per 1x128 tile, the attention output (the input of
// the linear after attention, also read by the attention's backward) once in E5M6 (12 bits) with
// its tile scales, and the MoE experts' SwiGLU input in fp8 with its tile scales; its output is
// recomputed in the backward (recompute_modules=moe_act says so).
enum class ActCache : uint8_t { kDefault, kFp8 };

// What recompute=selective reruns, Megatron-core's --recompute-modules (a set of these bits; the
// default is core_attn alone, the attention core of Korthikanti et al. 2022):
//   core_attn      the attention core (its inputs Q, K, V stay stored; the LSE does not)
//   layernorm      the two pre-norms: their outputs are freed and recomputed
//   moe_act        the routed experts' activation: its output is freed and recomputed
//   mla_up_proj    MLA's up projections and RoPE: Q, K, V are freed and recomputed
//   mlp            the dense MLP, checkpointed whole: only its input stays stored
//   shared_experts the MoE layer's shared experts, checkpointed whole likewise
//   moe            the whole MoE block (router, dispatch, experts, combine, shared experts),
//                  checkpointed: only its input stays stored, its all-to-alls rerun
enum RecomputeModule : uint8_t {
  kRecomputeCoreAttn = 1,
  kRecomputeLayernorm = 2,
  kRecomputeMoeAct = 4,
  kRecomputeMlaUpProj = 8,
  kRecomputeMlp = 16,
  kRecomputeSharedExperts = 32,
  kRecomputeMoe = 64,
};
inline constexpr uint8_t kDefaultRecomputeModules = kRecomputeCoreAttn;
// "core_attn+layernorm+..." in the order above; parse accepts any order, no repeats.
std::string format_recompute_modules(uint8_t modules);
Result<uint8_t> parse_recompute_modules(std::string_view s);

std::string_view to_string(Schedule s);     // "afab", "1f1b", "interleaved", "zb-h1", "dualpipe",
                                            // "dualpipev", "zb-v"
std::string_view to_string(Recompute r);    // "none", "selective", "full"
std::string_view to_string(DType d);        // "bf16", "fp8", "fp4"
std::string_view to_string(MomentDtype d);  // "fp32", "bf16"
std::string_view to_string(ActCache c);     // "default", "fp8"
Result<Schedule> parse_schedule(std::string_view s);
Result<Recompute> parse_recompute(std::string_view s);
Result<DType> parse_dtype(std::string_view s);
Result<MomentDtype> parse_moments(std::string_view s);
Result<ActCache> parse_act_cache(std::string_view s);

// How context parallelism exchanges K and V (Megatron-core --cp-comm-type): kP2p passes the K/V
// chunks around the ring beside the attention (default); kAllGather all-gathers K and V before
// the attention (and again in the backward, reduce-scattering their gradients); kA2a is
// Ulysses-style: all-to-alls turn the sequence shards of Q, K and V into head shards of the whole
// sequence and the output back.
enum class CpComm : uint8_t { kP2p, kAllGather, kA2a };
std::string_view to_string(CpComm c);  // "p2p", "all_gather", "a2a"
Result<CpComm> parse_cp_comm(std::string_view s);

// How the job's ranks map onto the cluster's GPUs (docs/simulator.md, "Rank placement";
// hw_profiles/placement.h does the mapping). kLinear: rank r on GPU r, nodes and NVLink domains
// filled in turn (torchrun/Slurm order). kPacked: each NVLink domain holds only whole groups of
// the layout's innermost parallel dimensions, leaving its remainder GPUs idle where they do not
// divide it (64 of an NVL72 rack's 72 for groups of 16 or 64), as Slurm's --segment schedules
// NVIDIA's GB200 jobs; it coincides with kLinear where the groups divide the domain.
enum class Placement : uint8_t { kLinear, kPacked };
std::string_view to_string(Placement p);  // "linear", "packed"
Result<Placement> parse_placement(std::string_view s);

// Whether `s` places 2·pp model chunks in a V (DualPipeV, ZB-V): rank s runs chunks s and
// 2·pp-1-s, so rank 0 holds both the first and the last chunk.
inline bool v_shaped(Schedule s) { return s == Schedule::kDualPipeV || s == Schedule::kZbV; }
// Whether `s` runs micro-batches from both ends (DualPipe) or down and back up a V (DualPipeV):
// DeepSeek's two schedules of overlapped forward-backward pairs.
inline bool bidirectional(Schedule s) {
  return s == Schedule::kDualPipe || s == Schedule::kDualPipeV;
}
// Whether every rank runs two chunks at once placed by the schedule (DualPipe's two directions,
// or a V: DualPipeV, ZB-V) rather than Megatron's interleaving.
inline bool two_chunks_per_rank(Schedule s) { return bidirectional(s) || s == Schedule::kZbV; }

struct Layout {
  int tp = 1;                     // tensor parallel degree
  int pp = 1;                     // pipeline stages
  std::optional<int> dp;          // data parallel degree; default GPUs / (tp·pp·cp)
  int cp = 1;                     // context parallel degree
  std::optional<CpComm> cp_comm;  // how CP exchanges K/V; default p2p (the ring)
  int ep = 1;                     // expert parallel degree (expert grid)
  int etp = 1;                    // tensor parallel degree inside the experts
  std::optional<int> vpp;         // virtual stages per pipeline rank; default 1, 2 if interleaved
  Schedule schedule = Schedule::k1F1B;
  std::optional<bool> sp;      // sequence parallel; default on when tp > 1
  int mbs = 1;                 // micro-batch size in sequences
  std::optional<int64_t> gbs;  // global batch in sequences; default mbs·dp (no accumulation)
  int zero = 0;                // ZeRO stage 0..3 over the dp·cp group
  Recompute recompute = Recompute::kNone;
  std::optional<uint8_t> recompute_modules;  // RecomputeModule bits; only with selective
  DType dtype = DType::kBf16;
  MomentDtype moments = MomentDtype::kFp32;  // Adam's m and v
  ActCache act_cache = ActCache::kDefault;   // what the backward's activations are kept in
  std::optional<int> pp_first;               // layers on the first pipeline stage (uneven split)
  std::optional<int> pp_last;                // layers on the last pipeline stage
  // The embedding (pp_embedding) and the LM head with the loss (pp_loss) each count as one layer
  // when the layers are split into pipeline chunks: the first (last) chunk gets one transformer
  // layer less (Megatron-core's --account-for-embedding-in-pipeline-split and
  // --account-for-loss-in-pipeline-split, transformer_block.py get_num_layers_to_build; the Llama 3
  // 405B layout, Dubey et al. 2024 §3.3.2). Not with pp_first / pp_last.
  bool pp_embedding = false;
  bool pp_loss = false;
  std::optional<Placement> place;  // rank placement; default linear

  bool operator==(const Layout&) const = default;

  // Accessors of a resolved layout (dp_degree reads dp unchecked; the rest apply defaults).
  int dp_degree() const { return *dp; }
  int vpp_degree() const { return vpp.value_or(schedule == Schedule::kInterleaved ? 2 : 1); }
  // Model chunks per pipeline rank: vpp, or 2 with the V-shaped schedules (v_shaped: the layers
  // cut into 2·pp chunks, rank s runs chunks s and 2·pp-1-s).
  int chunks_per_stage() const;
  bool sequence_parallel() const { return sp.value_or(tp > 1); }
  CpComm cp_comm_type() const { return cp_comm.value_or(CpComm::kP2p); }
  Placement placement() const { return place.value_or(Placement::kLinear); }
  // Whether recompute=selective reruns module `m` (RecomputeModule).
  bool recomputes(uint8_t m) const {
    return recompute == Recompute::kSelective &&
           (recompute_modules.value_or(kDefaultRecomputeModules) & m) != 0;
  }
  // The modules recompute reruns under selective: recompute_modules or the default.
  uint8_t recompute_module_set() const {
    return recompute == Recompute::kSelective ? recompute_modules.value_or(kDefaultRecomputeModules)
                                              : 0;
  }
  int64_t global_batch() const { return *gbs; }
  // Micro-batches per iteration per pipeline = gbs / (mbs·dp).
  int64_t num_microbatches() const { return *gbs / (static_cast<int64_t>(mbs) * *dp); }
  int64_t gpus() const { return static_cast<int64_t>(tp) * pp * cp * *dp; }
  // Expert data parallel degree: the expert grid's leftover of tp·cp·dp.
  int edp_degree() const { return tp * cp * *dp / (ep * etp); }
};

// Bounds on the runs scaleplan models (docs/reliability.md, "Bounded work"): the largest
// clusters built have ~10^5 GPUs and the longest trained contexts ~10^6 tokens; twice-and-more
// beyond those the inputs are refused with the limit, rather than overflowing or running for ever.
inline constexpr int64_t kMaxGpus = int64_t{1} << 20;         // 1,048,576 GPUs
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 22;       // 4,194,304 tokens
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 24;  // 16,777,216 sequences

// The model facts a layout is checked against (filled by models::layout_constraints).
struct LayoutConstraints {
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t num_experts = 0;  // 0 for a dense model
  int64_t seq_len = 0;
  bool mla =
      false;  // multi-head latent attention (DeepSeek): recompute_modules=mla_up_proj applies
};

// Parses the layout string. Errors name the key and the value: "layout: tp='x' is not an integer".
Result<Layout> parse_layout(std::string_view text);

// Whether the layout string names `key` itself (items split at commas, spaces trimmed, as
// parse_layout reads them), rather than leaving it to its default.
bool layout_gives(std::string_view text, std::string_view key);

// Canonical string: every set key, in the order of the table in DESIGN.md.
std::string format_layout(const Layout& layout);

// Fills the defaults (dp, vpp, sp, gbs) and checks every constraint of DESIGN.md against the model
// and the GPU count; the error names the key and the numbers. `gpus` <= 0 means "derive from dp"
// (and dp = 1 when the layout does not give it either).
Result<Layout> resolve_layout(const Layout& layout, const LayoutConstraints& model, int64_t gpus);

// Which pipeline rank runs which chunk: the one chunk-to-stage map that the program builder, the
// memory model and the planner's bound all use. A pipeline of `layout` runs
// pp·chunks_per_rank(layout) chunks, numbered in pipeline order g = 0, 1, ...:
//  - interleaved (and every one-chunk schedule): chunk g = v·pp + s runs on stage s, local chunk v
//    (Megatron-LM's interleaving);
//  - a V (DualPipeV, ZB-V): chunk g < pp on stage g (local chunk 0, the down arm), chunk g >= pp on
//    stage 2·pp-1-g (local chunk 1, the up arm);
//  - DualPipe: two copies of a pp-stage pipeline, one per direction; chunks 0..pp-1 are the first
//    copy's stages 0..pp-1 on ranks 0..pp-1, chunks pp..2pp-1 the second copy's stages 0..pp-1 on
//    ranks pp-1..0 (chunk g >= pp on rank 2·pp-1-g, as in a V). Chunk g holds the layers of model
//    chunk g mod pp.
// Chunks per pipeline rank: 2 with two_chunks_per_rank schedules, else vpp.
int chunks_per_rank(const Layout& layout);
// The pipeline stage (rank) that runs chunk g.
int stage_of_chunk(const Layout& layout, int chunk);
// The chunk that local chunk `local` (0..chunks_per_rank-1) of `stage` runs.
int chunk_of_stage(const Layout& layout, int stage, int local);
// The entry of stage_layer_counts (model chunks in pipeline order) whose layers chunk g runs:
// g, or g - pp for DualPipe's second copy.
int model_chunk(const Layout& layout, int chunk);

// Layers of each model chunk, in pipeline order: chunk c = v·pp + stage for virtual stage v
// (DualPipeV: chunks s and 2·pp-1-s on stage s). Size pp·chunks_per_stage(). Balanced unless
// pp_first / pp_last pin the ends: the remainder of an uneven split goes to the middle chunks
// first, since the first and last chunks also carry the embedding and the LM head (nanotron and
// torchtitan give some stages one layer more; Megatron pins the ends).
Result<std::vector<int>> stage_layer_counts(const Layout& layout, int64_t num_layers);

// Micro-batches each virtual stage of the interleaved schedule runs in a row before the next one
// (Megatron-core's microbatch_group_size_per_vp_stage, --microbatch-group-size-per-virtual-
// pipeline-stage). Megatron-core defaults it to pp and refuses a last group of 1..pp-1
// micro-batches, which would stall the pipeline on its own dependencies
// (forward_backward_pipelining_with_interleaving, megatron/core/pipeline_parallel/schedules.py at
// NVIDIA/Megatron-LM d98e8a6). This is the smallest N in [pp, m] it accepts: m mod N is 0 or at
// least pp; N = m always qualifies. Needs 1 <= pp <= m.
int64_t interleave_group_size(int64_t pp, int64_t microbatches);

// Size of each of `parts` equal shards of `total` items; an error naming `what` unless parts
// divides total. The one place divisibility of sharded dimensions is checked (STYLE.md #8).
Result<int64_t> shard_size(int64_t total, int64_t parts, std::string_view what);

// Elements of a ZeRO-sharded model state (optimizer states from ZeRO-1, gradients from ZeRO-2,
// weights at ZeRO-3) that one GPU holds, of `dense` local elements sharded over the ZeRO group
// (dp·cp) and `expert` local elements over the expert data-parallel group (edp): ceil(dense /
// dp·cp) + ceil(expert / edp). Megatron-core's distributed optimizer keeps one buffer per
// parameter group, padded to a multiple of its data-parallel size, so every rank holds the
// ceiling (Rajbhandari et al. 2020 §5.1-5.3; megatron/core/distributed/param_and_grad_buffer.py).
// The memory model, the program builder's optimizer step and the planner's bound all call it.
// `layout` must be resolved.
int64_t zero_shard(int64_t dense, int64_t expert, const Layout& layout);

}  // namespace scaleplan
