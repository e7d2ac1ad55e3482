// Backend: one rank's view of the machine that executes a training iteration's kernels and
// communication.
//
// A Backend object belongs to exactly one rank and is used from exactly one thread (the rank's
// thread); it is not thread-safe. It owns the device buffers it allocates (released with
// `release` or when the backend is destroyed), its streams, its events and its communicators.
// Every call returns a Status whose message names the op (and, on cuda, the library call, file and
// line): a failed CUDA, cuBLASLt or NCCL call is an error value, never a crash.
//
// The interface mirrors what a sim::Program holds, so that an executor maps ops one to one:
//   compute op (GemmShape / AttentionShape / memory-bound op)  -> gemm / attention_* / memory_op
//   collective (op, bytes, group)                               -> collective(group, args)
//   point-to-point transfer                                     -> send / recv / exchange
//   op start and end                                            -> record(stream) events, elapsed
// Ops are enqueued on a stream (StreamKind): one for compute and one per communication kind, as
// Megatron-LM and torchtitan do, so that communication of one kind overlaps compute and the other
// kinds. Ops on one stream run in order; `wait` orders two streams. The host backend runs every op
// synchronously in the calling thread, so its streams are threads: it may be called from one
// thread per stream at once (`concurrent_streams()`), each group's communication always from the
// same stream's thread; the cuda backend enqueues asynchronously from one thread and
// `synchronize` / `elapsed` block.
//
// Memory: each backend counts the bytes of its own allocations (`memory_stats`: live bytes and
// their high-water mark), which is the measured peak the executor reports: on cuda the
// high-water mark of what it took from cudaMalloc, on host of its heap allocations.
//
// Element conventions: matrices are row-major; buffers are typed (f32, bf16, i32). The cuda
// backend computes GEMM and attention in bf16 with fp32 accumulation and stores the memory-bound
// ops' activations in bf16 (fp32 math); the host backend computes and stores every kernel in f32
// (its collectives move any type, so their byte counts are the real ones).
// Group ranks are the ranks inside a group (0..size-1), as in NCCL communicators.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/kernel_shapes.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::runtime {

// kFp8E4m3: OCP FP8 E4M3 (1 B; runtime/host/fp8.h), what an fp8 cast writes and an fp8 GEMM reads.
// kE8m0: an MXFP8 block scale, a bare biased exponent (OCP MX v1.0 §5.4: 2^(e - 127), 0xff NaN).
enum class ElemType { kF32, kBf16, kI32, kFp8E4m3, kE8m0 };
int64_t element_size(ElemType t);
std::string_view to_string(ElemType t);

// A typed span of backend memory (device memory on cuda, host memory on host). Non-owning view;
// the backend that allocated it owns the storage.
struct Buffer {
  void* data = nullptr;
  int64_t count = 0;  // elements
  ElemType type = ElemType::kF32;

  Bytes bytes() const { return Bytes(count * element_size(type)); }
  bool valid() const { return data != nullptr || count == 0; }
  // Elements [offset, offset + n) of this buffer; the caller keeps it in range.
  Buffer slice(int64_t offset, int64_t n) const;
};

// Streams are core/comm.h's StreamKind, the Program's: one for compute and one per kind of
// communication (kHost only labels the host thread; a backend gives it a stream like the others).

// A point on a stream's timeline, recorded by `record`. Valid only on the backend that made it.
struct Event {
  int64_t id = -1;
};

// A communicator handle: a set of ranks that run collectives together (an NCCL communicator on
// cuda). `rank` is this rank's index in the group; size 0 means "not a member" (split with a
// negative color).
struct Group {
  int id = -1;
  int size = 0;
  int rank = -1;
  bool member() const { return size > 0; }
};

// ---- Compute ops -------------------------------------------------------------------------------

// C = alpha · op(A) · op(B) + beta · C, `shape.batch` times with packed strides. op(A) is [m, k]:
// A is stored [m, k], or [k, m] when trans_a. op(B) is [k, n]: B is [k, n], or [n, k] when trans_b.
// The backward GEMMs of a linear layer are the transposed forms (dX = dY·W^T, dW = X^T·dY).
struct GemmArgs {
  GemmShape shape;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  Buffer a, b, c;
};

// Fused (flash) attention, BHSD layout: q [b, h, q_len, d], k [b, kv_h, kv_len, d],
// v [b, kv_h, kv_len, dv], o [b, h, q_len, dv], lse [b, h, q_len] (f32, log-sum-exp of the scaled
// scores, saved for the backward). Grouped-query attention: query head i reads kv head
// i / (h / kv_h). Causal masks align bottom-right: query i is token kv_len - q_len + i and sees
// keys up to itself (the queries are the last q_len of the kv_len tokens, as in a KV cache or a CP
// chunk). Backward reads q, k, v, o, lse and d_o and writes dq, dk, dv.
struct AttentionArgs {
  AttentionShape shape;
  float scale = 0.0f;  // 0: 1/sqrt(head_dim)
  Buffer q, k, v, o, lse;
  Buffer d_o, dq, dk, dv;  // backward only
};

// The memory-bound ops of the per-layer operator list. Buffers used by each (rows × cols unless
// stated). "act" operands are stored in MemOpArgs::storage (f32, or bf16 as the frameworks keep
// activations: bf16 storage, fp32 math); the rest are f32, "index" buffers i32:
//   kRmsNorm      out = x / rms(x row) · w[cols]                          (act x, w -> act out)
//     backward    out = dx from x and y = dy (the input gradient; dw is not formed)
//   kLayerNorm    out = (x - mean) / std · w[cols] + b[cols]              (act x, w, b -> act out)
//   kRope         out = x with each (2i, 2i+1) pair of every head rotated by pos·theta^(-2i/hd),
//                 pos = row % seq_len; cols = heads · head_dim            (act x -> act out)
//     backward    the rotation by -pos·theta^(-2i/hd) (the gradient of a rotation)
//   kSwiglu       out[r, c] = silu(x[r, c]) · x[r, cols + c]; x is rows × 2·cols (gate | up)
//     backward    out = [dgate | dup] (rows × 2·cols) from x and y = dy (rows × cols)
//   kGelu         out = gelu_tanh(x)                                       (act x -> act out)
//     backward    out = gelu_tanh'(x) · y (y = dy)
//   kSoftmax      out = row-wise softmax(x)                                (act x -> act out)
//   kCrossEntropy out[rows] = -log softmax(x)[label]; out2 = d loss/d x of the mean loss
//                 (x fp32 logits, index labels[rows] -> out, out2: the fp32 loss of torchtitan
//                 and of Megatron's vocab-parallel cross-entropy)
//   kEmbedding    out[r] = w[index[r]]; w is vocab × cols                  (index, act w -> act
//   out) kMoeRouting   top_k of softmax(x) per row (x logits rows × experts): out weights rows ×
//   top_k
//                 (renormalized), out_index expert ids rows × top_k
//   kAdamW        one AdamW step over rows·cols elements: x param (updated in place), y grad,
//                 w first moment m, b second moment v (both updated)
//   kAdd          out = x + y (residual add)                               (act x, y -> act out)
//   kCopy         out = x                                                  (act)
//   kCast         out = x rounded to bf16: x f32, out act (f32 out keeps the rounded value);
//     backward    out = x widened to f32: x act, out f32 (the gradient of a downcast)
//   kFill         out = p.value
//   kL2Norm       out[rows] = sum of squares of each row of x (a gradient norm's partial sums)
//   kElementwise  out = p.scale · x                                        (act)
//   kFp8CastTranspose  Transformer Engine's cast-transpose under delayed scaling: out =
//                 e4m3(x · w[0]) rows × cols and out2 = its transpose, cols × rows (e4m3, rounded
//                 to nearest even, saturating at ±448); b[0] = max(b[0], max |x|), the amax the
//                 recipe's next scale comes from (act x; w: one f32, the scale; b: one f32, the
//                 amax, updated in place -> e4m3 out, out2; runtime/cuda/fp8_cast.h)
//   kFp8Cast      the same cast without the transpose: out = e4m3(x · w[0]), b[0] raised, as
//                 Transformer Engine runs it where fp8 GEMMs take any operand layout (Blackwell)
//   kAmax         out[0] = max |x|: current scaling's amax pass, whose scale the cast then uses
//                 (act x -> f32 out[0], overwritten)
//   kMxfp8Quantize  MXFP8 (OCP MX v1.0, Transformer Engine's quantize_mxfp8): out = the row-wise
//                 copy, each 1 × 32 block of a row scaled by its own power of two, w its E8M0
//                 scales (rows × ceil(cols/32)); out2 = the column-wise copy, rows × cols too,
//                 each 32 × 1 block of a column scaled, b its scales (ceil(rows/32) × cols). A
//                 block's scale is amax/448 rounded up to a power of two (TE float_to_e8m0);
//                 a last, shorter block is scaled alone (act x -> e4m3 out, out2; e8m0 w, b)
// MemOp is core/kernel_shapes.h's; the backends run every one of them. memory_operands below
// gives each operand's count and type.
inline constexpr int kNumBackendMemOps = kNumMemOps;

struct MemOpParams {
  float eps = 1e-5f;       // norms
  float theta = 10000.0f;  // RoPE base
  int64_t head_dim = 0;    // RoPE: 0 means cols (one head)
  int64_t seq_len = 0;     // RoPE: 0 means rows
  int64_t vocab = 0;       // embedding table rows
  int64_t top_k = 0;       // MoE routing
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, weight_decay = 0.1f;  // AdamW
  int64_t step = 1;    // AdamW step number (bias correction), >= 1
  float value = 0.0f;  // fill
  float scale = 1.0f;  // elementwise
};

struct MemOpArgs {
  MemOp op = MemOp::kAdd;
  int64_t rows = 0, cols = 0;
  Buffer x, y, w, b, index;     // inputs (see MemOp)
  Buffer out, out2, out_index;  // outputs
  MemOpParams p;
  // Element type of the "act" operands (see MemOp above); the math is fp32 either way. Ops
  // without act operands ignore it (memory_args_for sets f32 for them).
  ElemType storage = ElemType::kF32;
  // The backward of kRmsNorm, kRope, kSwiglu, kGelu, kCast (see above); other ops have one form.
  bool backward = false;
  // The stream it runs on: the compute stream for a Program's kernels; the executor fills and
  // samples communication buffers on their own stream, so that its checks add no dependency
  // between streams.
  StreamKind stream = StreamKind::kCompute;
};

// Whether `op` has act operands (MemOpArgs::storage applies) and whether it has a backward form.
bool has_act_operands(MemOp op);
bool has_backward_form(MemOp op);

// Elements and type of every operand a call reads or writes (count 0: not used): one source for
// the executor's carving, the backends' checks and the profile's buffers.
struct MemOperand {
  int64_t count = 0;
  ElemType type = ElemType::kF32;
};
struct MemOperands {
  MemOperand x, y, w, b, index, out, out2, out_index;
};
MemOperands memory_operands(const MemOpArgs& args);

// Bytes read plus written and FLOPs of one memory-bound op call, each operand in its element
// type: the MemoryBoundShape the cost models time, derived here once for both backends and the
// microbenchmarks.
MemoryBoundShape memory_shape(const MemOpArgs& args);

// The inverse: the sizes (op, rows, cols and the params the op reads: top_k, vocab, head_dim) of
// a call of `shape.op`, its act operands stored as `storage` (and its backward form if
// `backward` and the op has one), that moves `shape.bytes` as memory_shape counts them, to within
// one row, and at least one row. Rows are `cols` wide: min(shape's elements, kMemOpCols), the
// experts of a routing (8, top_k 2), an embedding table of `rows` rows. The executor runs a
// Program's memory-bound op (its MemoryBoundShape: op kind and bytes) as this call, so that it
// moves the bytes the simulator timed. No buffers are set.
inline constexpr int64_t kMemOpCols = 1024;
MemOpArgs memory_args_for(const MemoryBoundShape& shape, ElemType storage = ElemType::kF32,
                          bool backward = false);

// ---- Communication -----------------------------------------------------------------------------

// The collective ops and their names are core/comm.h's (nccl-tests names: "alltoall", ...), so
// that measurements, fitted models, the collective cost model and the Program speak of the same
// ops. A backend runs every op but kSendRecv as a collective; point-to-point has its own calls
// (send/recv below).
inline constexpr int kNumBackendCollectives = 9;  // the ops collective() runs: all but kSendRecv
static_assert(
    static_cast<int>(CollectiveOp::kSendRecv) == kNumBackendCollectives,
    "kSendRecv must stay the last op: backends loop over the first kNumBackendCollectives");
enum class ReduceOp { kSum, kMax, kMin, kAvg };

// One collective, NCCL's count conventions (count is always per rank):
//   all_reduce      send count, recv count
//   all_gather      send count, recv size·count (rank r's block at r·count)
//   reduce_scatter  send size·count, recv count (rank r gets block r of the reduction)
//   all_to_all      send size·count, recv size·count (block j of rank i's send -> block i of j's
//   recv) broadcast       send count at root, recv count everywhere reduce          send count,
//   recv count at root gather          send count, recv size·count at root scatter         send
//   size·count at root, recv count barrier         no buffers
// recv may equal send (in place) for all_reduce, broadcast and reduce.
struct CollectiveArgs {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Buffer send, recv;
  int64_t count = 0;
  ReduceOp reduce = ReduceOp::kSum;
  int root = 0;  // group rank
  StreamKind stream = StreamKind::kDp;
};

// Refuses a reduction (all_reduce, reduce_scatter, reduce) over e4m3 buffers, naming the op:
// fp8 tensors are only moved (Transformer Engine all-gathers the fp8 input shards under SP);
// gradients are reduced in bf16 or f32. Every backend checks it first.
Status check_collective_type(const CollectiveArgs& args);

// Bytes one collective call "moves" in the nccl-tests sense (the size column of nccl-tests: the
// larger of the send and receive buffers of one rank), from which algbw = size / time.
Bytes collective_size(const CollectiveArgs& args, int group_size);

// One half of a point-to-point transfer; a batch of them is issued together (ncclGroupStart/End),
// so that a rank can send to its next pipeline stage while receiving from its previous one.
struct P2POp {
  bool is_send = true;
  Buffer buffer;
  int peer = 0;  // group rank
};

// ---- The backend -------------------------------------------------------------------------------

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;         // "host" or "cuda"
  virtual std::string device_name() const = 0;  // "NVIDIA H200", "host cpu (x86_64)"
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Ranks that share this rank's node (one process or one machine): placement of groups.
  virtual int local_size() const = 0;
  virtual const Group& world() const = 0;
  // Element type of GEMM and attention operands here: bf16 on cuda, f32 on host.
  virtual ElemType matmul_type() const = 0;
  // Element type a framework's activations are stored in for the memory-bound ops (their act
  // operands, runtime/backend.h MemOp): bf16 on cuda, as torchtitan under autocast and
  // Megatron-LM with Transformer Engine keep them; f32 on host, which computes in f32.
  virtual ElemType activation_type() const { return ElemType::kF32; }

  // Whether each stream may be driven by its own thread at once (host: ops run synchronously in
  // the calling thread); false: one thread enqueues on every stream (cuda).
  virtual bool concurrent_streams() const { return false; }

  // Memory. `allocate` zero-fills. upload/download copy bytes() bytes to or from host memory and
  // complete before returning; both first wait for all work enqueued on this rank's streams.
  virtual Result<Buffer> allocate(int64_t count, ElemType type) = 0;
  virtual void release(Buffer& buffer) = 0;
  // Bytes held by this backend's allocations now (`allocate`d and not released, plus its own
  // workspaces) and their high-water mark since construction or the last reset_peak.
  struct MemoryStats {
    Bytes live, peak;
  };
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak() = 0;
  // Stream-ordered allocation and release (a Program's kAlloc / kFree ops): the memory is
  // allocated when `stream` reaches the call and released once the work enqueued before the
  // release is done, so that a release never waits for the device (cuda: cudaMallocAsync /
  // cudaFreeAsync, zero-filled on the stream; host: allocate / release, ops being synchronous).
  // memory_stats counts them when they are called.
  virtual Result<Buffer> allocate_on(StreamKind stream, int64_t count, ElemType type) {
    (void)stream;
    return allocate(count, type);
  }
  virtual void release_on(StreamKind stream, Buffer& buffer) {
    (void)stream;
    release(buffer);
  }
  virtual Status upload(const Buffer& dst, const void* host) = 0;
  virtual Status download(const Buffer& src, void* host) = 0;

  // Which attention implementation attention_forward/backward run for `shape`: "cudnn",
  // "flash2", "unfused" (AttentionShape::kernel, as the framework runs it), "reference" (the cuda
  // backend's own test kernels) or "host". Recorded with every measurement of `profile`.
  virtual std::string attention_implementation(const AttentionShape& shape) const = 0;

  // Compute, on the compute stream.
  virtual Status gemm(const GemmArgs& args) = 0;
  virtual Status attention_forward(const AttentionArgs& args) = 0;
  virtual Status attention_backward(const AttentionArgs& args) = 0;
  virtual Status memory_op(const MemOpArgs& args) = 0;

  // Communication. `split` is collective over `parent` (ncclCommSplit): members passing the same
  // color form one group, ordered by (key, parent rank); a negative color joins none.
  virtual Result<Group> split(const Group& parent, int color, int key) = 0;
  virtual Status collective(const Group& group, const CollectiveArgs& args) = 0;
  virtual Status exchange(const Group& group, const std::vector<P2POp>& ops, StreamKind stream) = 0;
  Status send(const Group& g, const Buffer& b, int peer, StreamKind s = StreamKind::kPpSend) {
    return exchange(g, {P2POp{true, b, peer}}, s);
  }
  Status recv(const Group& g, const Buffer& b, int peer, StreamKind s = StreamKind::kPpSend) {
    return exchange(g, {P2POp{false, b, peer}}, s);
  }

  // Streams and timestamps. `record` marks the point after everything enqueued so far on the
  // stream; `wait` makes later work on `waiter` start after `event`; `elapsed` waits for both
  // events and returns the time between them; `since_start` is an event's time since the backend
  // started.
  virtual Result<Event> record(StreamKind stream) = 0;
  virtual Status wait(StreamKind waiter, Event event) = 0;
  virtual Result<Duration> elapsed(Event start, Event end) = 0;
  virtual Result<Duration> since_start(Event event) = 0;
  // The events recorded so far (but the backend's own start) will not be read again: the backend
  // may reuse them for later records (cuda: a pool of cudaEvent_t, so that a step records into
  // the previous step's events instead of creating two per op per step). Their ids become invalid.
  virtual void recycle_events() {}
  // Whether the work before `event` has completed; never blocks (host: always true).
  virtual Result<bool> query(Event event) = 0;
  virtual Status synchronize() = 0;

  // Ends this rank's pending and later communication with an error naming `why`, so that peers
  // blocked on this rank wake up (host in process: every rank's waits; MPI: this process's;
  // cuda: ncclCommAbort of its communicators).
  virtual void abort(const std::string& why) = 0;
};

}  // namespace scaleplan::runtime
