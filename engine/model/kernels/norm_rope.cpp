// RMSNorm (with the residual add fused in) and RoPE, in place on the fused qkv.
// Part of the fused CPU kernels: the vector layer and the ops' declarations are in
// kernels.h, the overview, the decoder stack and the ops' registration in cpu_ops.cpp.

#include "kernels.h"

namespace KERNEL_NS {

// ---------------------------------------------------------------------------------------
// RMSNorm as Hugging Face's LlamaRMSNorm computes it: y = w * T(x * rsqrt(mean(x^2) + eps))
// in float32, the product with w rounded to T.  With ``residual``: first
// x <- T(x + residual) in place (the decoder's residual add), then the norm of the sum.
template <typename T>
void rmsnorm_impl(at::Tensor& x, const at::Tensor* residual, const at::Tensor& w, double eps,
                  at::Tensor& y) {
  const int64_t N = x.size(0), H = x.size(1);
  T* xp = x.data_ptr<T>();
  const T* rp = residual ? residual->data_ptr<T>() : nullptr;
  const T* wp = w.data_ptr<T>();
  T* yp = y.data_ptr<T>();
  const int64_t xs = x.stride(0), rs = residual ? residual->stride(0) : 0;
  at::parallel_for(0, N, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      T* xr = xp + n * xs;
      V ss = vzero();
      for (int64_t i = 0; i < H; i += 16) {
        V a = load16(xr + i);
        if (rp) {
          a = rnd<T>(vadd(a, load16(rp + n * rs + i)));
          store16(xr + i, a);
        }
        ss = vfmadd(a, a, ss);
      }
      const float inv = 1.f / std::sqrt(hsum(ss) / static_cast<float>(H) + static_cast<float>(eps));
      const V iv = vset1(inv);
      T* yr = yp + n * H;
      for (int64_t i = 0; i < H; i += 16)
        store16(yr + i, vmul(load16(wp + i), rnd<T>(vmul(load16(xr + i), iv))));
    }
  });
}

at::Tensor rmsnorm_common(at::Tensor& x, const at::Tensor* residual, const at::Tensor& w,
                          double eps) {
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "rmsnorm: dtype ", dt);
  check_float(w, dt, "rmsnorm weight");
  TORCH_CHECK(x.dim() == 2 && x.stride(1) == 1 && x.size(1) % 16 == 0 && w.numel() == x.size(1)
                  && w.is_contiguous(),
              "rmsnorm: x [N, H] with contiguous rows and H a multiple of 16");
  if (residual) {
    check_float(*residual, dt, "rmsnorm residual");
    TORCH_CHECK(residual->sizes() == x.sizes() && residual->stride(1) == 1,
                "rmsnorm: residual shape");
  }
  auto y = at::empty(x.sizes(), x.options());
  if (dt == at::kBFloat16)
    rmsnorm_impl<BFloat16>(x, residual, w, eps, y);
  else
    rmsnorm_impl<float>(x, residual, w, eps, y);
  return y;
}

at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor xx = x;
  return rmsnorm_common(xx, nullptr, w, eps);
}

at::Tensor add_rmsnorm_(at::Tensor x, const at::Tensor& residual, const at::Tensor& w, double eps) {
  return rmsnorm_common(x, &residual, w, eps);
}

// ---------------------------------------------------------------------------------------
// RoPE (rotate-half) of the q and k heads of a fused qkv projection, in place:
// qkv [N, (heads) * D + ...]: the first ``heads`` head rows of each token are rotated,
// x <- T(T(x * cos) + T(swap_halves(x) * sin)) as the eager ops round; cos, sin [N, D] in T
// (sin with its sign folded in: engine.model.rope).
template <typename T>
void rope_impl(at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
               int64_t D) {
  const int64_t N = qkv.size(0), half = D / 2;
  T* xp = qkv.data_ptr<T>();
  const T* cp = cos.data_ptr<T>();
  const T* sp = sin.data_ptr<T>();
  const int64_t xs = qkv.stride(0);
  at::parallel_for(0, N * heads, 16, [&](int64_t begin, int64_t end) {
    for (int64_t nh = begin; nh < end; ++nh) {
      const int64_t n = nh / heads, h = nh % heads;
      T* x = xp + n * xs + h * D;
      const T* c = cp + n * D;
      const T* s = sp + n * D;
      for (int64_t i = 0; i < half; i += 16) {
        const V lo = load16(x + i), hi = load16(x + half + i);
        const V nlo = rnd<T>(vadd(rnd<T>(vmul(lo, load16(c + i))),
                                                rnd<T>(vmul(hi, load16(s + i)))));
        const V nhi = rnd<T>(vadd(rnd<T>(vmul(hi, load16(c + half + i))),
                                                rnd<T>(vmul(lo, load16(s + half + i)))));
        store16(x + i, nlo);
        store16(x + half + i, nhi);
      }
    }
  });
}

void rope_(at::Tensor qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
           int64_t head_dim) {
  const auto dt = qkv.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "rope_: dtype ", dt);
  check_float(cos, dt, "rope_ cos");
  check_float(sin, dt, "rope_ sin");
  TORCH_CHECK(qkv.dim() == 2 && qkv.stride(1) == 1 && head_dim % 32 == 0
                  && heads * head_dim <= qkv.size(1),
              "rope_: qkv [N, >= heads * head_dim] with contiguous rows, head_dim % 32 == 0");
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous() && cos.numel() == qkv.size(0) * head_dim
                  && sin.numel() == cos.numel(),
              "rope_: cos, sin must be contiguous [N, head_dim]");
  if (dt == at::kBFloat16)
    rope_impl<BFloat16>(qkv, cos, sin, heads, head_dim);
  else
    rope_impl<float>(qkv, cos, sin, heads, head_dim);
}


}  // namespace KERNEL_NS
