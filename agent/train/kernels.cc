#include "agent/train/kernels.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tae::train {

namespace {

// oneDNN's row-major C = alpha op(A) op(B) + beta C (dnnl.h, not installed with Debian's libdnnl2;
// the signature is the same since oneDNN 1.0). Called outside a parallel region it runs on the
// OpenMP threads libtorch sized (train.threads); inside one, on the calling thread alone.
using DnnlSgemm = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc);

DnnlSgemm FindSgemm() {
  // libtorch_cpu links libdnnl, so the symbol is in the process whenever libtorch is.
  static const auto sgemm = reinterpret_cast<DnnlSgemm>(::dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return sgemm;
}

std::atomic<bool> g_enabled_for_test{true};

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int status = FindSgemm()(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda,
                                 b, ldb, beta, c, ldc);
  TORCH_CHECK(status == 0, "dnnl_sgemm(", m, "x", n, "x", k, ") failed with status ", status);
}

bool IsFloatCpu(const torch::Tensor& t) {
  return t.defined() && t.scalar_type() == torch::kFloat && t.device().is_cpu();
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  // bias is optional, not an undefined tensor: autograd records an input edge for every tensor
  // argument, and an undefined one has no device to record.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias_or_none) {
    // Named for profiles (common/profile/trace.cc files "gemm" under matmul).
    RECORD_FUNCTION("tae::linear_sgemm", std::vector<c10::IValue>({x, weight}));
    const torch::Tensor bias = bias_or_none.value_or(torch::Tensor());
    const int64_t in = weight.size(1);
    const int64_t out = weight.size(0);
    torch::Tensor rows_in = x.reshape({-1, in}).contiguous();
    const int64_t rows = rows_in.size(0);
    // With a bias, C starts as the bias rows and the product adds to it (beta 1), as addmm does.
    torch::Tensor y = bias.defined() ? bias.expand({rows, out}).contiguous()
                                     : torch::empty({rows, out}, x.options());
    Sgemm(false, true, rows, out, in, 1.0F, rows_in.data_ptr<float>(), in, weight.data_ptr<float>(),
          in, bias.defined() ? 1.0F : 0.0F, y.data_ptr<float>(), out);
    ctx->save_for_backward({rows_in, weight});
    ctx->saved_data["x_sizes"] = x.sizes().vec();
    ctx->saved_data["has_bias"] = bias.defined();
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = out;
    return y.view(sizes);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    RECORD_FUNCTION("tae::linear_sgemm_backward", std::vector<c10::IValue>());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& rows_in = saved[0];
    const torch::Tensor& weight = saved[1];
    const int64_t in = weight.size(1);
    const int64_t out = weight.size(0);
    const int64_t rows = rows_in.size(0);
    torch::Tensor dy = grads[0].reshape({rows, out}).contiguous();
    torch::Tensor dx;
    torch::Tensor dweight;
    torch::Tensor dbias;
    if (ctx->needs_input_grad(0)) {  // dx = dy W
      dx = torch::empty({rows, in}, dy.options());
      Sgemm(false, false, rows, in, out, 1.0F, dy.data_ptr<float>(), out, weight.data_ptr<float>(),
            in, 0.0F, dx.data_ptr<float>(), in);
      dx = dx.view(ctx->saved_data["x_sizes"].toIntVector());
    }
    if (ctx->needs_input_grad(1)) {  // dW = dy^T x
      dweight = torch::empty({out, in}, dy.options());
      Sgemm(true, false, out, in, rows, 1.0F, dy.data_ptr<float>(), out, rows_in.data_ptr<float>(),
            in, 0.0F, dweight.data_ptr<float>(), in);
    }
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) {
      dbias = dy.sum(0);
    }
    return {dx, dweight, dbias};
  }
};

// The fixed shape of one attention call, and where each head's rows are.
struct AttentionGeometry {
  int64_t batch, time, heads, kv_heads, head_dim;
  int64_t row;      // floats from one time step to the next in qkv: (heads + 2 kv_heads) * head_dim
  int64_t out_row;  // the same in the output: heads * head_dim

  explicit AttentionGeometry(const torch::Tensor& qkv, int64_t heads_in, int64_t kv_heads_in)
      : batch(qkv.size(0)),
        time(qkv.size(1)),
        heads(heads_in),
        kv_heads(kv_heads_in),
        head_dim(qkv.size(3)),
        row(qkv.size(2) * qkv.size(3)),
        out_row(heads_in * qkv.size(3)) {}
  int64_t Q(int64_t b, int64_t h) const { return b * time * row + h * head_dim; }
  int64_t K(int64_t b, int64_t g) const { return b * time * row + (heads + g) * head_dim; }
  int64_t V(int64_t b, int64_t g) const {
    return b * time * row + (heads + kv_heads + g) * head_dim;
  }
  int64_t Out(int64_t b, int64_t h) const { return b * time * out_row + h * head_dim; }
  int64_t Scores(int64_t b, int64_t h) const { return (b * heads + h) * time * time; }
};

// Per K/V head, the query heads it serves (ascending).
std::vector<std::vector<int64_t>> QueriesOf(const std::vector<int64_t>& kv_of_query,
                                            int64_t kv_heads) {
  std::vector<std::vector<int64_t>> queries(static_cast<size_t>(kv_heads));
  for (size_t h = 0; h < kv_of_query.size(); ++h) {
    queries[static_cast<size_t>(kv_of_query[h])].push_back(static_cast<int64_t>(h));
  }
  return queries;
}

// The causal mask and ALiBi on one head's [time, time] scores, in place: the same values as
// adding the -inf-above-the-diagonal mask and then subtracting slope * |i - j|.
void MaskScores(float* scores, int64_t time, bool causal, const float* slope) {
  for (int64_t i = 0; i < time; ++i) {
    float* row = scores + i * time;
    const int64_t visible = causal ? i + 1 : time;
    if (slope != nullptr) {
      for (int64_t j = 0; j < visible; ++j) {
        row[j] = row[j] - *slope * static_cast<float>(std::abs(i - j));
      }
    }
    for (int64_t j = visible; j < time; ++j) {
      row[j] = -std::numeric_limits<float>::infinity();
    }
  }
}

// Softmax's backward on one head's [time, time] block, in place: dP becomes P * (dP - rowsum(P *
// dP)), as libtorch's _softmax_backward_data computes it. A masked entry has P = 0 and gets 0.
void SoftmaxBackward(const float* probs, float* grad, int64_t time) {
  for (int64_t i = 0; i < time; ++i) {
    const float* p = probs + i * time;
    float* d = grad + i * time;
    float dot = 0.0F;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < time; ++j) {
      dot += p[j] * d[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < time; ++j) {
      d[j] = p[j] * (d[j] - dot);
    }
  }
}

class AttentionFunction : public torch::autograd::Function<AttentionFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& qkv,
                               const FusedAttentionOptions& options) {
    RECORD_FUNCTION("tae::fused_attention", std::vector<c10::IValue>());  // "attention" in profiles
    const AttentionGeometry g(qkv, options.heads, options.kv_heads);
    const float scale = static_cast<float>(options.scale);
    const float* in = qkv.data_ptr<float>();
    torch::Tensor scores = torch::empty({g.batch, g.heads, g.time, g.time}, qkv.options());
    float* s = scores.data_ptr<float>();
    // Scores, one (batch, head) block per task: scale * q k^T, then the mask and ALiBi while the
    // block is in cache.
    at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / g.heads;
        const int64_t h = i % g.heads;
        const int64_t kv = options.kv_of_query[static_cast<size_t>(h)];
        Sgemm(false, true, g.time, g.time, g.head_dim, scale, in + g.Q(b, h), g.row,
              in + g.K(b, kv), g.row, 0.0F, s + g.Scores(b, h), g.time);
        MaskScores(
            s + g.Scores(b, h), g.time, options.causal,
            options.alibi_slopes.empty() ? nullptr : &options.alibi_slopes[static_cast<size_t>(h)]);
      }
    });
    torch::Tensor probs = torch::softmax(scores, -1);
    scores = torch::Tensor();
    torch::Tensor out = torch::empty({g.batch, g.time, g.heads, g.head_dim}, qkv.options());
    const float* p = probs.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, g.batch * g.heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / g.heads;
        const int64_t h = i % g.heads;
        const int64_t kv = options.kv_of_query[static_cast<size_t>(h)];
        Sgemm(false, false, g.time, g.head_dim, g.time, 1.0F, p + g.Scores(b, h), g.time,
              in + g.V(b, kv), g.row, 0.0F, o + g.Out(b, h), g.out_row);
      }
    });
    ctx->save_for_backward({qkv, probs});
    ctx->saved_data["heads"] = options.heads;
    ctx->saved_data["kv_heads"] = options.kv_heads;
    ctx->saved_data["kv_of_query"] = options.kv_of_query;
    ctx->saved_data["scale"] = options.scale;
    return out;
  }

  // With P the probabilities and dO the output's gradient, per (batch, query head h of K/V head
  // g): dP = dO v^T, dv_g += P^T dO, dS = softmax's backward (P * (dP - rowsum(P * dP))),
  // dq_h = scale dS k_g, dk_g += scale dS^T q_h. One task per (batch, K/V head), so the heads that
  // share a K/V head add into it in order and no two threads write the same block; dP and dS live
  // in the task's own [time, time] buffer, in cache.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    RECORD_FUNCTION("tae::fused_attention_backward", std::vector<c10::IValue>());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& qkv = saved[0];
    const torch::Tensor& probs = saved[1];
    const AttentionGeometry g(qkv, ctx->saved_data["heads"].toInt(),
                              ctx->saved_data["kv_heads"].toInt());
    const std::vector<std::vector<int64_t>> queries =
        QueriesOf(ctx->saved_data["kv_of_query"].toIntVector(), g.kv_heads);
    const auto scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    torch::Tensor dout = grads[0].contiguous();
    torch::Tensor dqkv = torch::empty_like(qkv);
    const float* in = qkv.data_ptr<float>();
    const float* p = probs.data_ptr<float>();
    const float* dO = dout.data_ptr<float>();
    float* din = dqkv.data_ptr<float>();
    at::parallel_for(0, g.batch * g.kv_heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(static_cast<size_t>(g.time * g.time));
      float* ds = scratch.data();
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / g.kv_heads;
        const int64_t kv = i % g.kv_heads;
        float beta = 0.0F;
        for (int64_t h : queries[static_cast<size_t>(kv)]) {
          const float* p_h = p + g.Scores(b, h);
          Sgemm(false, true, g.time, g.time, g.head_dim, 1.0F, dO + g.Out(b, h), g.out_row,
                in + g.V(b, kv), g.row, 0.0F, ds, g.time);
          Sgemm(true, false, g.time, g.head_dim, g.time, 1.0F, p_h, g.time, dO + g.Out(b, h),
                g.out_row, beta, din + g.V(b, kv), g.row);
          SoftmaxBackward(p_h, ds, g.time);
          Sgemm(false, false, g.time, g.head_dim, g.time, scale, ds, g.time, in + g.K(b, kv), g.row,
                0.0F, din + g.Q(b, h), g.row);
          Sgemm(true, false, g.time, g.head_dim, g.time, scale, ds, g.time, in + g.Q(b, h), g.row,
                beta, din + g.K(b, kv), g.row);
          beta = 1.0F;
        }
      }
    });
    return {dqkv, torch::Tensor()};
  }
};

}  // namespace

bool FastKernelsTurnedOff() {
  static const bool off = [] {
    const char* value = std::getenv("TAE_FAST_KERNELS");
    return value != nullptr && (std::string_view(value) == "0" || std::string_view(value) == "off");
  }();
  return off;
}

bool FastKernelsEnabled() {
  return FindSgemm() != nullptr && !FastKernelsTurnedOff() && g_enabled_for_test.load();
}

std::string OneDnnIsa() {
  using GetIsa = int (*)();
  const auto get = reinterpret_cast<GetIsa>(::dlsym(RTLD_DEFAULT, "dnnl_get_effective_cpu_isa"));
  if (get == nullptr) {
    return "none";
  }
  // dnnl_cpu_isa_t (oneDNN 2.x, dnnl_types.h).
  const int isa = get();
  switch (isa) {
    case 0x1:
      return "sse41";
    case 0x3:
      return "avx";
    case 0x7:
      return "avx2";
    case 0x407:
      return "avx2_vnni";
    case 0x27:
      return "avx512_core";
    case 0x67:
      return "avx512_core_vnni";
    case 0xe7:
      return "avx512_core_bf16";
    case 0x3e7:
      return "avx512_core_amx";
    default:
      return absl::StrCat("isa 0x", absl::Hex(isa));
  }
}

void SetFastKernelsEnabledForTest(bool enabled) { g_enabled_for_test.store(enabled); }

torch::Tensor FastLinear(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias) {
  if (!FastKernelsEnabled() || !IsFloatCpu(x) || !IsFloatCpu(weight) || weight.dim() != 2 ||
      !weight.is_contiguous() || x.dim() < 2 || x.size(-1) != weight.size(1) || x.numel() == 0 ||
      (bias.defined() && (!IsFloatCpu(bias) || bias.dim() != 1))) {
    return {};
  }
  return LinearFunction::apply(x, weight,
                               bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt);
}

torch::Tensor FusedAttention(const torch::Tensor& qkv, const FusedAttentionOptions& options) {
  TORCH_CHECK(FastKernelsEnabled() && IsFloatCpu(qkv) && qkv.dim() == 4 && qkv.is_contiguous() &&
                  qkv.size(2) == options.heads + 2 * options.kv_heads &&
                  static_cast<int64_t>(options.kv_of_query.size()) == options.heads,
              "FusedAttention: unsupported input");
  return AttentionFunction::apply(qkv, options);
}

}  // namespace tae::train
