// The Qwen3 BF16 decode engine (issue: workloads under test): random weights drawn on the device
// from a seed, a KV cache of max_batch slots x max_context tokens (kernels/decode/decode_kernels.h
// has the layout), and step(): one decode step of all layers for a batch of sequences, replayed
// from a CUDA graph per batch size (captured lazily on first use, on the engine's stream -- any
// stream, a green context's included).
//
// A step, per row b: embedding of tokens[b]; per layer: input RMSNorm, qkv GEMV, q/k head norms,
// RoPE at positions[b], K/V appended at that position of slot slots[b], split-KV attention over
// positions[b] + 1 tokens (these four in one launch pair: the prologue folded into stage 1), o_proj
// GEMV + residual, post-attention RMSNorm, gate_up GEMV, SiLU gate, down GEMV + residual; then the
// final norm, the lm_head GEMV (tied to the embeddings, as decode_step_roofline counts them) and
// greedy argmax. Logits stay in a device buffer.
//
// A projection whose GEMV configuration reads a packed layout (gemv_weight_layout: the packed
// and wgmma_pk families) at some batch size up to max_batch gets a copy of its weights in that
// layout, made once at construction (pack_gemv_weights); the GEMVs of the other batch sizes read
// the row-major weights. The copy is of the same random weights, so it adds their bytes to device
// memory and nothing else.
//
// Inputs (tokens, positions, slots) live in a device array that each step overwrites with one
// cudaMemcpyAsync before the graph launch, so one graph serves every length up to max_context.
//
// The KV cache is a pool of tokens (decode_engine_config::kv_pool_tokens); each slot names a
// block of it (bind_slot): by default slot s is the block at token s * max_context of capacity
// max_context, the serving driver binds blocks its allocator places.
//
// Two prefills. prefill() does not run the model: it fills a slot's K and V for positions
// [0, context) with deterministic synthetic values (seeded by layer, head and position) -- the
// step-level workloads' set-up, where decode cost is what is measured. prefill_chunk() runs the
// model over prompt tokens (chunked prefill, the serving workloads): every layer's projections as
// cuBLAS GEMMs over the chunk's rows, q/k norm + RoPE + K/V append, causal attention per
// sequence (attention_prefill.h), the MLP; then each part's last row through the final norm,
// lm_head and argmax (a sequence's first token, when the part ends its prompt). Eager launches,
// no graph: a chunk's shape changes every step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "kernels/decode/attention_config.h"
#include "kernels/decode/gemm_cublas.h"
#include "kernels/decode/gemv_bf16.h"
#include "workloads/decode_engine_plan.h"

namespace kg {

class decode_engine {
public:
  struct layer_weights {
    const __nv_bfloat16 *input_norm, *qkv, *q_norm, *k_norm, *o_proj, *post_norm, *gate_up, *down;
  };

  // Draws the weights on `stream` and waits for them. The stream is not owned; it may be any
  // created stream (a green context's too) but not the legacy default stream, which cannot be
  // captured.
  decode_engine(const decode_engine_config& c, cudaStream_t stream);
  ~decode_engine();
  decode_engine(const decode_engine&) = delete;
  decode_engine& operator=(const decode_engine&) = delete;

  const decode_engine_config& config() const { return c_; }
  cudaStream_t stream() const { return stream_; }

  // Queues the synthetic prefill of `slot` (positions [0, context)).
  void prefill(int slot, int context);
  // Points `slot` at the pool's block [kv_start, kv_start + kv_capacity) (the caller keeps blocks
  // of running sequences apart). Throws std::invalid_argument outside the pool.
  void bind_slot(int slot, int kv_start, int kv_capacity);
  // Every slot back to its starting block (token slot * max_context, capacity max_context, while
  // the pool holds it): the serving driver's bindings undone when its run ends.
  void bind_default_slots();
  // One part of a prompt in a prefill_chunk: tokens [begin, begin + tokens) of the prompt in
  // `slot` (positions begin.., the earlier ones already in its block), the prompt's tokens drawn
  // from `prompt` (prompt_token).
  struct prefill_part {
    int slot = 0, begin = 0, tokens = 0;
    std::uint64_t prompt = 0;
  };
  // Queues the model over the parts' tokens (at most max_prefill_tokens in all, one part per
  // slot); prefill_next_tokens then gives each part's greedy next token (the sequence's first
  // output when the part ends its prompt). Throws std::invalid_argument for parts out of range.
  void prefill_chunk(const std::vector<prefill_part>& parts);
  std::vector<int> prefill_next_tokens(int parts) const; // waits for the stream
  // The prompt's token at `position`: a counter hash of (seed, prompt, position) over the vocab.
  int prompt_token(std::uint64_t prompt, int position) const;
  // Queues one decode step over rows 0..n-1 (n = tokens.size(), 1..max_batch): row b feeds
  // tokens[b] at positions[b] (< max_context) of slot slots[b] (distinct slots). `eager` launches
  // the kernels one by one instead of the graph (the graph-vs-eager test).
  void step(const std::vector<int>& tokens, const std::vector<int>& positions,
            const std::vector<int>& slots, bool eager = false);
  // Captures the graphs of batch sizes 1..max_batch now (else each is captured on first use).
  void capture_all();
  int graphs_captured() const; // in the current launch mode

  // A user's kernel for one projection's GEMV ("qkv", "o_proj", "gate_up", "down", "lm_head";
  // kernelgate run --override gemv.down=FILE.cu): called instead of launch_gemv_bf16 for that
  // projection, on the engine's stream, so it is captured into the same graphs. It gets the
  // row-major weights ([n, k]) and must return the launch's error. gate_up overridden runs the
  // SiLU gate as its own kernel. Graphs captured before are dropped (recaptured on next use).
  // Batches above max_gemv_batch run the projection as a cuBLAS GEMM, override or not; an
  // override is refused (std::invalid_argument) where max_gemv_batch > 32, past the batches the
  // suite checks it at.
  using gemv_override_fn =
      std::function<cudaError_t(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                int batch, int n, int k, cudaStream_t s)>;
  void set_gemv_override(const std::string& projection, gemv_override_fn fn);

  // The GEMV configuration `projection` ("qkv", "o_proj", "gate_up", "down", "lm_head") runs at
  // batch size `batch` instead of pick_gemv_config_in_step's, or that again with nullopt. The
  // table was chosen with each kernel timed alone, the step's own rows inside the step;
  // kg_bench_decode_step --gemv times the step with other rows, where what overlaps the kernels
  // beside it counts. Where norms fold, the norm folds into this configuration if it takes it
  // (gemv_takes_folded_norm), else stays a kernel; gate_up's takes the SiLU gate as its epilogue
  // where it can (gemv_gated_supported). A copy of the weights in the configuration's layout is
  // made now where the engine holds none, and the GEMV workspace grows to fit. Throws
  // std::invalid_argument for an unknown projection, a batch outside 1..min(max_batch,
  // max_gemv_batch, 128) or a configuration launch_gemv_bf16 does not take at that shape. Waits for
  // the stream; graphs captured before are dropped.
  void set_gemv_config(const std::string& projection, int batch,
                       const std::optional<gemv_config>& c);

  // The split-KV attention's configuration for every batch size (kg_bench_decode_step times the
  // step under the sweep's configurations), or pick_attention_config(batch) with nullopt, the
  // default. Throws std::invalid_argument for an unsupported one. Graphs captured before are
  // dropped (recaptured on next use).
  void set_attention_config(const std::optional<decode::attention_config>& c);
  decode::attention_config attention_config_of(int batch) const;

  // Switches config().fold_norms for later steps; graphs captured before are dropped
  // (kg_bench_decode_step --norms times the step both ways).
  void set_fold_norms(bool on);
  // Switches config().gate_in_gemv for later steps; graphs captured before are dropped.
  void set_gate_in_gemv(bool on);

  // Switches config().programmatic_launch: later steps launch the kernels (and capture graphs)
  // that way. Each mode keeps its own graphs, so switching back and forth (the side-by-side
  // step timing of decode-qwen3-4b) captures each graph once.
  void set_programmatic_launch(bool on);

  // The kernels enqueue launches per layer for a batch of `batch` rows, by role, in launch order
  // (one embedding gather comes before the layers; the final norm, lm_head and argmax after):
  // the step profiler (bench/decode_step_profile.cpp) names the traced kernels with it.
  std::vector<const char*> layer_roles(int batch) const;
  // ... and the step's kernels after the layers (the final norm unless folded, lm_head, argmax).
  std::vector<const char*> tail_roles(int batch) const;

  // Read back after the last step (these wait for the stream).
  std::vector<int> next_tokens(int batch) const;
  std::vector<std::uint16_t> logits_bits(int batch) const; // bf16 bit patterns, [batch, vocab]

  // Device views for tests and references.
  const layer_weights& layer(int l) const { return layers_.at(static_cast<std::size_t>(l)); }
  const __nv_bfloat16* embedding() const { return embedding_; }
  const __nv_bfloat16* final_norm() const { return final_norm_; }
  const __nv_bfloat16* k_cache(int layer) const;
  const __nv_bfloat16* v_cache(int layer) const;
  std::size_t cache_elements_per_layer() const; // of K (or V) alone

private:
  void enqueue(int batch); // the step's kernels, on stream_
  void enqueue_prefill(const std::vector<prefill_part>& parts, int rows);
  void allocate_prefill_buffers();
  void gemv(const char* projection, const __nv_bfloat16* x, const __nv_bfloat16* w,
            __nv_bfloat16* y, int batch, int n, int k, const gemv_fusion* fusion = nullptr);
  // Which of the step's norms enqueue(batch) folds into a GEMV (config().fold_norms).
  struct norm_folds {
    bool residual_in_gemv = false;                   // o_proj and down add into the residual stream
    bool input = false, post = false, final = false; // into qkv, gate_up, lm_head
  };
  norm_folds norm_folds_of(int batch) const;
  // Whether enqueue(batch) gives the SiLU gate to the gate_up GEMV's epilogue (post_folded: the
  // post norm folds into that GEMV, which then runs pick_gemv_config_folded's configuration).
  bool gate_in_gemv(int batch, bool post_folded) const;
  // The configuration of the n x k GEMV at `batch`: set_gemv_config's, else the table's.
  gemv_config gemv_config_of(int batch, int n, int k) const;
  // ... with a norm folded in (and the gate, if `gated`): set_gemv_config's where it takes them
  // (else nullopt), else pick_gemv_config_folded's.
  std::optional<gemv_config> folded_config_of(int batch, int n, int k, bool gated) const;
  // Every projection's row-major weights and shape (each layer's four, then lm_head's).
  struct gemv_weights {
    const __nv_bfloat16* w;
    int n, k;
  };
  std::vector<gemv_weights> all_gemv_weights() const;
  // Copies into packed_of_ (one new buffer) every (weights, layout) `wants` asks for by the
  // weights' shape and that the engine does not hold yet.
  void pack_weights(const std::function<bool(int n, int k, gemv_layout l)>& wants);
  // Forgets every captured step (both launch modes): a setting the graphs baked in has changed.
  void drop_graphs();
  // The copy of `w` in layout `l` (w itself for row_major); std::logic_error if none is held.
  const __nv_bfloat16* weights_in(const __nv_bfloat16* w, gemv_layout l) const;
  // Whether the gate_up GEMV at `batch` with configuration `c` needs the paired copy: the
  // configuration takes the gate and reads it packed.
  bool gate_reads_paired(int batch, const gemv_config& c) const;

  decode_engine_config c_;
  decode_engine_sizes sizes_;
  cudaStream_t stream_;
  device_buffer weights_, cache_, act_, inputs_, attn_work_, gemv_work_;
  std::vector<device_buffer> packed_; // the copies in packed_of_, one buffer per pack_weights
  // The attention's merge counters (decode::attention_args::counters): max_batch x kv heads,
  // zeroed once; each launch leaves them zero. set_attention_config's configuration, if any.
  device_buffer attn_counters_;
  std::optional<decode::attention_config> attention_override_;
  // Row-major weights and a layout -> their copy in it (in packed_), where some batch size's
  // GEMV configuration reads one.
  struct packed_copy {
    const __nv_bfloat16* weights;
    gemv_layout layout;
    const __nv_bfloat16* copy;
  };
  std::vector<packed_copy> packed_of_;
  std::vector<layer_weights> layers_;
  const __nv_bfloat16 *embedding_ = nullptr, *final_norm_ = nullptr;
  // Activations, max_batch rows each.
  __nv_bfloat16 *hidden_, *normed_, *qkv_, *attn_, *o_out_, *gate_up_, *act_out_, *mlp_out_,
      *logits_;
  int *d_tokens_, *d_lengths_, *d_slots_, *d_next_;
  std::vector<int> staging_;
  std::vector<std::unique_ptr<cuda_graph_exec>> graphs_;            // index: batch size
  std::vector<std::unique_ptr<cuda_graph_exec>> other_mode_graphs_; // the other launch mode's
  std::map<std::string, gemv_override_fn> gemv_overrides_;
  std::map<std::tuple<int, int, int>, gemv_config> gemv_configs_; // (batch, n, k): set_gemv_config
  std::vector<std::pair<int, int>> slot_blocks_; // per slot: first token, capacity (0: unbound)
  int* d_capacities_ = nullptr;
  std::unique_ptr<cublas_gemm> gemm_;
  // Prefill rows (max_prefill_tokens) and their inputs: token, position, block start, capacity
  // per row; each part's last row; the parts' next tokens.
  device_buffer prefill_act_, prefill_inputs_;
  __nv_bfloat16 *p_hidden_ = nullptr, *p_normed_ = nullptr, *p_qkv_ = nullptr, *p_attn_ = nullptr,
                *p_o_ = nullptr, *p_gate_up_ = nullptr, *p_act_ = nullptr, *p_mlp_ = nullptr,
                *p_last_ = nullptr, *p_logits_ = nullptr;
  int *d_p_tokens_ = nullptr, *d_p_positions_ = nullptr, *d_p_starts_ = nullptr,
      *d_p_caps_ = nullptr, *d_p_last_ = nullptr, *d_p_next_ = nullptr;
  int max_prefill_parts_ = 0;
  std::vector<int> prefill_staging_;
};

// Copies n bf16 values to the host as bit patterns (waits for `s`).
std::vector<std::uint16_t> copy_bf16_to_host(const __nv_bfloat16* p, std::size_t n, cudaStream_t s);

} // namespace kg
