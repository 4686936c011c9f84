// Row-wise ops of a decode step: SwiGLU, the K/V row scatter, greedy argmax.
// Part of the fused CPU kernels: the vector layer and the ops' declarations are in
// kernels.h, the overview, the decoder stack and the ops' registration in cpu_ops.cpp.

#include "kernels.h"

namespace KERNEL_NS {
// ---------------------------------------------------------------------------------------
// SwiGLU activation of a fused gate/up projection: gu [N, 2I] -> T(T(silu(gate)) * up).
template <typename T>
void silu_mul_impl(const at::Tensor& gu, at::Tensor& out) {
  const int64_t N = gu.size(0), I = gu.size(1) / 2;
  const T* gp = gu.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const int64_t gs = gu.stride(0);
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const T* g = gp + n * gs;
      const T* u = g + I;
      T* o = op + n * I;
      for (int64_t i = 0; i < I; i += 16) {
        const V x = load16(g + i);
        const V act = rnd<T>(vdiv(x, vadd(vset1(1.f), vexp(vneg(x)))));
        store16(o + i, vmul(act, load16(u + i)));
      }
    }
  });
}

at::Tensor silu_mul(const at::Tensor& gu) {
  const auto dt = gu.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "silu_mul: dtype ", dt);
  TORCH_CHECK(gu.device().is_cpu() && gu.dim() == 2 && gu.stride(1) == 1 && gu.size(1) % 32 == 0,
              "silu_mul: gu [N, 2I] on CPU with contiguous rows and I a multiple of 16");
  auto out = at::empty({gu.size(0), gu.size(1) / 2}, gu.options());
  if (dt == at::kBFloat16)
    silu_mul_impl<BFloat16>(gu, out);
  else
    silu_mul_impl<float>(gu, out);
  return out;
}

// ---------------------------------------------------------------------------------------
// dst[index[i]] = src[i] for rows of a 2-D tensor (any dtype): the decode step's K/V
// writes into the paged cache and the dense blocks, a few hundred scattered rows, where
// index_copy_ measured 95-123 us a call at c32.
void copy_rows_(at::Tensor dst, const at::Tensor& index, const at::Tensor& src) {
  TORCH_CHECK(dst.dim() == 2 && src.dim() == 2 && dst.is_contiguous() && src.is_contiguous()
                  && dst.size(1) == src.size(1) && dst.scalar_type() == src.scalar_type()
                  && dst.device().is_cpu() && src.device().is_cpu(),
              "copy_rows_: dst [R, W] and src [n, W] contiguous CPU tensors of one dtype");
  TORCH_CHECK(index.scalar_type() == at::kLong && index.is_contiguous()
                  && index.numel() == src.size(0),
              "copy_rows_: index must be [n] int64");
  const int64_t n = src.size(0), R = dst.size(0);
  const int64_t bytes = src.size(1) * src.element_size();
  const int64_t* ip = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    TORCH_CHECK(ip[i] >= 0 && ip[i] < R, "copy_rows_: row ", ip[i], " out of [0, ", R, ")");
  char* d = static_cast<char*>(dst.data_ptr());
  const char* sp = static_cast<const char*>(src.data_ptr());
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::memcpy(d + ip[i] * bytes, sp + i * bytes, bytes);
  });
}

// ---------------------------------------------------------------------------------------
// Greedy sampling's argmax over each row of float32 logits [N, V] -> int64 [N]: torch's
// CPU argmax reduces a row element by element (115 us for [32, 4096] on 2 threads).
// torch's rules: the first maximal index wins, and a NaN is the maximum (the first NaN).
at::Tensor argmax_rows(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.device().is_cpu()
                  && x.stride(1) == 1 && x.size(1) > 0,
              "argmax_rows: x must be a CPU float32 [N, C > 0] matrix with contiguous rows");
  const int64_t N = x.size(0), C = x.size(1), xs = x.stride(0);
  auto out = at::empty({N}, x.options().dtype(at::kLong));
  const float* xp = x.data_ptr<float>();
  int64_t* op = out.data_ptr<int64_t>();
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* r = xp + n * xs;
      const int64_t C16 = C / 16 * 16;
      V m = vset1(-std::numeric_limits<float>::infinity());
      unsigned nan = 0;
      for (int64_t i = 0; i < C16; i += 16) {
        const V v = load16(r + i);
        nan |= nan_mask(v);
        m = vmax(m, v);
      }
      float best = hmax(m);
      bool has_nan = nan != 0;
      for (int64_t i = C16; i < C; ++i) {
        has_nan |= std::isnan(r[i]);
        best = std::max(best, r[i]);
      }
      int64_t at = 0;
      if (has_nan) {
        while (!std::isnan(r[at])) ++at;
      } else {
        const V b = vset1(best);
        unsigned eq = 0;
        int64_t i = 0;
        for (; i < C16; i += 16)
          if ((eq = eq_mask(load16(r + i), b))) break;
        if (eq) {
          at = i + __builtin_ctz(eq);
        } else {
          at = C16;
          while (r[at] != best) ++at;
        }
      }
      op[n] = at;
    }
  });
  return out;
}


}  // namespace KERNEL_NS
