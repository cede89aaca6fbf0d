#pragma once

// How far a float32 result may be from the exact one, whatever kernel computed it.
//
// A `Bounded` is a float64 evaluation of an expression together with, per element, a bound on
// how far ANY float32 evaluation of the same expression can be from it. Each operation adds the
// standard worst-case rounding bound and propagates the bounds of its inputs (Higham, Accuracy
// and Stability of Numerical Algorithms, 2nd ed., §3.1 and §3.5): a sum of n products computed
// in float32 in any order, blocked, vectorised or with FMA, is within gamma(n) * sum |a_i b_i| of
// the exact sum, gamma(n) = n u / (1 - n u), u = 2^-24. The bound depends on the expression and
// the data only, never on which sgemm ran (OpenBLAS or oneDNN, AVX2 or AVX-512) nor on its
// summation order, so a check against it holds on every x86-64 CPU. It is also small: for the
// models here (reductions of at most a few hundred terms) about 1e-5 of the terms' magnitude,
// while a wrong formula is off by the terms' own size.
//
// The float64 evaluation's own rounding (u = 2^-53) is added too, so the reference is not
// assumed exact. Element-wise functions (exp, sigmoid, erf) are taken to be within
// kElementwiseUlps of the correctly rounded result, relative to the larger of their argument and
// value (libtorch's vectorised versions are documented to within 1 to 3.5 ulp; the margin covers
// the cancellation inside gelu's 1 + erf).

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

namespace tae::train::rounding {

inline constexpr double kFloat32Unit = 0x1p-24;
inline constexpr double kFloat64Unit = 0x1p-53;
inline constexpr double kElementwiseUlps = 8.0;

// gamma(n) for float32, plus float64's own for the reference.
inline double Gamma(int64_t n) {
  const auto terms = static_cast<double>(n);
  return terms * kFloat32Unit / (1.0 - terms * kFloat32Unit) +
         terms * kFloat64Unit / (1.0 - terms * kFloat64Unit);
}

struct Bounded {
  torch::Tensor value;  // float64
  torch::Tensor error;  // float64, >= 0, the same shape
};

// An input held exactly (a float32 tensor is exact in float64).
inline Bounded Exact(const torch::Tensor& x) {
  torch::Tensor value = x.detach().to(torch::kDouble);
  return {value, torch::zeros_like(value)};
}

// x @ weight^T + bias; weight [out, in] and bias [out] (or undefined) exact float32 parameters.
inline Bounded Linear(const Bounded& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const torch::Tensor w = weight.detach().to(torch::kDouble);
  torch::Tensor value = torch::matmul(x.value, w.t());
  torch::Tensor magnitude = torch::matmul(x.value.abs() + x.error, w.abs().t());
  int64_t terms = weight.size(1);
  if (bias.defined()) {
    const torch::Tensor b = bias.detach().to(torch::kDouble);
    value = value + b;
    magnitude = magnitude + b.abs();
    terms += 1;
  }
  return {value, torch::matmul(x.error, w.abs().t()) + Gamma(terms) * magnitude};
}

// a @ b over the last two dimensions (batched), both with errors.
inline Bounded MatMul(const Bounded& a, const Bounded& b) {
  const int64_t terms = a.value.size(-1);
  torch::Tensor error =
      torch::matmul(a.value.abs(), b.error) + torch::matmul(a.error, b.value.abs()) +
      torch::matmul(a.error, b.error) +
      Gamma(terms) * torch::matmul(a.value.abs() + a.error, b.value.abs() + b.error);
  return {torch::matmul(a.value, b.value), error};
}

// a * b element-wise (broadcasting).
inline Bounded Mul(const Bounded& a, const Bounded& b) {
  torch::Tensor error = a.value.abs() * b.error + b.value.abs() * a.error + a.error * b.error +
                        kFloat32Unit * (a.value.abs() + a.error) * (b.value.abs() + b.error);
  return {a.value * b.value, error};
}

// a * s for an exact scalar s.
inline Bounded Scale(const Bounded& a, double s) {
  return {a.value * s, std::abs(s) * a.error + kFloat32Unit * std::abs(s) * a.value.abs()};
}

// f(x) element-wise for an f with |f'| <= lipschitz everywhere.
template <typename F>
Bounded Map(const Bounded& x, F f, double lipschitz) {
  torch::Tensor value = f(x.value);
  torch::Tensor rounding =
      kElementwiseUlps * kFloat32Unit * torch::maximum(value.abs(), x.value.abs() + x.error);
  return {value, lipschitz * x.error + rounding};
}
// The steepest slopes: silu's is 1.0998 (at x = 2.40), gelu's 1.1289 (at x = 1.41).
inline constexpr double kSiluLipschitz = 1.1;
inline constexpr double kGeluLipschitz = 1.13;

// softmax over the last dimension; entries of `scores` at -inf (masked) are exactly 0 after it.
// With every score off by at most e, each probability p moves by at most p (exp(2e) - 1); its own
// evaluation (shift by the row's max, exp, a sum of n terms, a division) adds at most
// p (|s - max| u + (kElementwiseUlps + 2) u + gamma(n)).
inline Bounded Softmax(const Bounded& scores) {
  torch::Tensor value = torch::softmax(scores.value, -1);
  const torch::Tensor finite = scores.value.isfinite();
  const torch::Tensor shown_error =
      torch::where(finite, scores.error, torch::zeros_like(scores.error));
  const torch::Tensor worst = std::get<0>(shown_error.max(-1, /*keepdim=*/true));
  const torch::Tensor row_max = std::get<0>(scores.value.max(-1, /*keepdim=*/true));
  const torch::Tensor shift =
      torch::where(finite, (scores.value - row_max).abs(), torch::zeros_like(scores.value));
  const double own = (kElementwiseUlps + 2.0) * kFloat32Unit + Gamma(scores.value.size(-1));
  torch::Tensor error = value * (torch::expm1(2.0 * worst) + shift * kFloat32Unit + own);
  return {value, error};
}

inline torch::Tensor AsDouble(const torch::Tensor& t) { return t.detach().to(torch::kDouble); }

// Whether every element of the float32 `actual` is within the bound of the reference; `why` says
// by how much the worst element is in or out, for the failure message.
inline bool Within(const torch::Tensor& actual, const Bounded& reference, std::string* why) {
  const torch::Tensor off = (AsDouble(actual) - reference.value).abs();
  const torch::Tensor ratio = off / (reference.error + 1e-300);
  std::ostringstream out;
  out << "max |difference| " << off.max().item<double>() << ", max bound "
      << reference.error.max().item<double>() << ", worst difference/bound "
      << ratio.max().item<double>();
  *why = out.str();
  return actual.sizes() == reference.value.sizes() && (off <= reference.error).all().item<bool>();
}

// Two float64 evaluations of the same maths through differently shaped products (a model with a
// head removed against one with that head masked, say) differ by float64 rounding only: at most
// gamma(n) = n 2^-53 of the terms' magnitude per product, n at most a few hundred here (2e-14),
// grown by no more than a few orders of magnitude through a small model's layers. A tolerance of
// kFloat64Agreement of the result's scale is above that with a wide margin, and six orders of
// magnitude below a difference in the maths (a wrong head, a leaking mask: 1e-3 and more).
inline constexpr double kFloat64Agreement = 1e-9;

inline bool SameInFloat64(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(1.0, AsDouble(a).abs().max().item<double>());
  return a.sizes() == b.sizes() &&
         (AsDouble(a) - AsDouble(b)).abs().max().item<double>() <= kFloat64Agreement * scale;
}

}  // namespace tae::train::rounding
