#pragma once

// CPU fast paths for the training step: the linear layers and the attention core as autograd
// Functions whose matrix products call oneDNN's sgemm (libdnnl, which libtorch itself links)
// directly.
//
// Why: libtorch 1.13 sends float32 matmuls to the BLAS it was built with (Debian: OpenBLAS, with
// its own thread pool beside libtorch's OpenMP one), and its CPU bmm multiplies a batch one
// matrix at a time (a select + addmm_ per matrix, each a 2-thread BLAS call): attention's
// [batch * heads] small products cost thousands of operator calls and thread hand-offs a step.
// Here a linear layer is one sgemm per product on libtorch's OpenMP threads, and attention is one
// parallel loop over (batch, K/V head) in which each thread multiplies its blocks with a
// single-threaded sgemm, reading q/k/v in place from the fused projection's output and writing
// the heads' outputs already in [batch, time, heads, head_dim] order (no transposes, no copies).
//
// When they run: FastKernelsEnabled() (dnnl_sgemm found in the process, not turned off by a
// test), float32 CPU tensors. Callers fall back to libtorch's ops otherwise, and attention also
// when dropout on its probabilities is active (training with model.dropout > 0): see
// AttentionImpl::forward.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "agent/train/kernel_facts.h"

namespace tae::train {

// Tests compare the fast paths with libtorch's ops: false sends every caller to libtorch's.
void SetFastKernelsEnabledForTest(bool enabled);

// x @ weight^T + bias (bias may be undefined), x [..., in], weight [out, in]. An undefined result
// when the fast path does not apply (not enabled, not float32 CPU, weight not contiguous): the
// caller then uses torch::linear.
torch::Tensor FastLinear(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias);

struct FusedAttentionOptions {
  int64_t heads = 0;                 // query heads in qkv
  int64_t kv_heads = 0;              // K/V heads in qkv
  std::vector<int64_t> kv_of_query;  // per query head, its K/V head (0..kv_heads-1)
  bool causal = true;
  double scale = 1.0;               // on q k^T
  std::vector<float> alibi_slopes;  // per query head: -slope * |i - j| on the scores; empty: none
};

// Per (batch, query head h): softmax(scale * q_h k_g^T + causal mask - alibi) v_g, g =
// kv_of_query[h], without dropout. qkv: [batch, time, heads + 2 * kv_heads, head_dim], contiguous,
// float32 (the query heads, then the K heads, then the V heads, as the fused projection writes
// them). Returns [batch, time, heads, head_dim]; differentiable with respect to qkv. Only when
// FastKernelsEnabled().
torch::Tensor FusedAttention(const torch::Tensor& qkv, const FusedAttentionOptions& options);

}  // namespace tae::train
