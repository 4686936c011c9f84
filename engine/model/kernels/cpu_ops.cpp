// Fused CPU kernels around the engine model's GEMMs (AVX-512; float32 and bfloat16), and
// a bfloat16 GEMM for decode-sized batches (AVX512-BF16, compiled where the CPU has it).
//
// Each op replaces a chain of small eager torch ops whose per-op dispatch, allocation and
// memory round trips cost more than their arithmetic at decode batch sizes; each has a
// torch reference (engine/model/kernels/__init__.py; the GEMM's is float64 math) that
// tests/engine/test_engine_kernels.py compares it against.  bfloat16 results are rounded
// where the reference (and Hugging Face's Llama) rounds, so the kernels and the reference
// agree to the last bit except where a float32 sum or exp is ordered differently.
//
// Built at run time by torch.utils.cpp_extension (engine/model/kernels/__init__.py) with
// -march=native on the machine that runs it; registered as torch.ops.knob_engine.*.

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using fVec = at::vec::Vectorized<float>;
using at::BFloat16;

// 16 elements to/from float32 lanes.
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const BFloat16* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
// float32 -> bfloat16 bits, round to nearest even (c10::BFloat16's rounding; NaN stays NaN).
inline __m256i to_bf16_bits(__m512 x) {
  __m512i i = _mm512_castps_si512(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(i, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(i, _mm512_set1_epi32(0x7fff)), lsb);
  r = _mm512_srli_epi32(r, 16);
  __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}
inline void store16(float* p, __m512 x) { _mm512_storeu_ps(p, x); }
inline void store16(BFloat16* p, __m512 x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_bits(x));
}
// The value x takes when stored as T (identity for float32).
inline __m512 round_as(__m512 x, const float*) { return x; }
inline __m512 round_as(__m512 x, const BFloat16*) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(to_bf16_bits(x)), 16));
}
template <typename T>
inline __m512 rnd(__m512 x) { return round_as(x, static_cast<const T*>(nullptr)); }

inline float hsum(__m512 x) { return _mm512_reduce_add_ps(x); }

// ---------------------------------------------------------------------------------------
// Decode attention over a dense context block plus the step's own token.
// q [B, H, D] (rows may be strided); k, v [B, Hkv, D] the own token's; kd, vd
// [B, Hkv, cap, D] contiguous; lens [B] int64: positions of the block before the own
// token.  Scores, softmax and the weighted sum are float32; out [B, H, D] in q's dtype.
// GB query heads of one KV head (a group, all or part of its G) over positions [j0, j1)
// of the sequence "block positions 0..n-1, then the own token at n": each K and V row is
// loaded once for all of them.  Writes the normalised output to o (T) when part is null,
// else the partial result of a split: per head the unnormalised sum (D floats), the
// scores' max and the sum of exps (m = -inf, z = 0 for an empty range).
// Software prefetch of the next item's block rows, one row per row attended here: the
// blocks are cold in a decode step (the layer's weights streamed through the caches since
// the last one), and one (sequence, KV head) of a short context is too short a run for the
// hardware prefetcher to ramp up.  Long contexts are left to the hardware prefetcher (a
// whole item ahead is too far: measured slower at 2000 positions).
constexpr int64_t kPrefetchRows = 256;
template <typename T, int64_t D>
inline void prefetch_row(const T* row) {
  for (int64_t l = 0; l < (D * int64_t(sizeof(T)) + 63) / 64; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(row) + l * 64, _MM_HINT_T0);
}

// Row j of "block rows 0..n-1, then the own token's row" as NV float32 vectors, row r of
// the next item's block prefetched while it lasts (its first nn rows).
template <typename T, int NV>
inline void load_row(const T* block, const T* own, int64_t n, int64_t j, const T* next,
                     int64_t r, int64_t nn, __m512* out) {
  constexpr int64_t D = NV * 16;
  if (r < nn) prefetch_row<T, D>(next + r * D);
  const T* row = j < n ? block + j * D : own;
  for (int i = 0; i < NV; ++i) out[i] = load16(row + i * 16);
}

template <typename T, int NV, int GB>
inline void attend_group(const T* q, int64_t q_stride, const T* kb, const T* vb,
                         const T* kown, const T* vown, int64_t n, int64_t j0, int64_t j1,
                         __m512 sc, float* s, int64_t sl, T* o, float* part,
                         const T* nk = nullptr, const T* nv = nullptr, int64_t nn = 0) {
  constexpr int64_t D = NV * 16;
  const int64_t len = j1 - j0;
  if (len <= 0) {
    for (int g = 0; g < GB; ++g) {
      std::fill(part + g * (D + 2), part + g * (D + 2) + D, 0.f);
      part[g * (D + 2) + D] = -std::numeric_limits<float>::infinity();
      part[g * (D + 2) + D + 1] = 0.f;
    }
    return;
  }
  __m512 qv[GB][NV];
  for (int g = 0; g < GB; ++g)
    for (int i = 0; i < NV; ++i) qv[g][i] = _mm512_mul_ps(load16(q + g * q_stride + i * 16), sc);
  // Scores, float32 (the own token is position n).
  for (int64_t j = j0; j < j1; ++j) {
    __m512 kv[NV];
    load_row<T, NV>(kb, kown, n, j, nk, j - j0, nn, kv);
    for (int g = 0; g < GB; ++g) {
      __m512 a = _mm512_mul_ps(qv[g][0], kv[0]);
      for (int i = 1; i < NV; ++i) a = _mm512_fmadd_ps(qv[g][i], kv[i], a);
      s[g * sl + j - j0] = hsum(a);
    }
  }
  float mx[GB], z[GB];
  for (int g = 0; g < GB; ++g) {
    float* sg = s + g * sl;
    float m = sg[0];
    for (int64_t j = 1; j < len; ++j) m = std::max(m, sg[j]);
    const fVec mv(m);
    fVec zv(0.f);
    for (int64_t j = 0; j < len; j += 16) {
      const int64_t c = std::min<int64_t>(16, len - j);
      fVec e = (fVec::loadu(sg + j, c) - mv).exp_u20();
      if (c < 16) e = fVec::set(fVec(0.f), e, c);
      e.store(sg + j, c);
      zv = zv + e;
    }
    mx[g] = m;
    z[g] = hsum(zv);
  }
  __m512 acc[GB][NV];
  for (int g = 0; g < GB; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_setzero_ps();
  for (int64_t j = j0; j < j1; ++j) {
    __m512 vv[NV];
    load_row<T, NV>(vb, vown, n, j, nv, j - j0, nn, vv);
    for (int g = 0; g < GB; ++g) {
      const __m512 p = _mm512_set1_ps(s[g * sl + j - j0]);
      for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_fmadd_ps(p, vv[i], acc[g][i]);
    }
  }
  for (int g = 0; g < GB; ++g) {
    if (part == nullptr) {
      const __m512 inv = _mm512_set1_ps(1.f / z[g]);
      for (int i = 0; i < NV; ++i) store16(o + g * D + i * 16, _mm512_mul_ps(acc[g][i], inv));
    } else {
      float* pg = part + g * (D + 2);
      for (int i = 0; i < NV; ++i) _mm512_storeu_ps(pg + i * 16, acc[g][i]);
      pg[D] = mx[g];
      pg[D + 1] = z[g];
    }
  }
}

// splits > 1 (split-K, ENGINE_DECODE_TARGET_CTAS): each sequence's n + 1 positions are cut
// into that many contiguous ranges, attended in parallel, then merged exactly
// (o = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) z_s).
template <typename T, int NV, int GB>
void decode_attention_impl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& kd, const at::Tensor& vd, const at::Tensor& lens,
                           double scale, int64_t splits, at::Tensor& out) {
  constexpr int64_t D = NV * 16;
  const int64_t B = kd.size(0), Hkv = kd.size(1), cap = kd.size(2);
  const int64_t G = q.size(1) / Hkv, S = splits;
  const T* qp = q.data_ptr<T>();
  const T* kp = k.data_ptr<T>();
  const T* vp = v.data_ptr<T>();
  const T* kdp = kd.data_ptr<T>();
  const T* vdp = vd.data_ptr<T>();
  const int64_t* lp = lens.data_ptr<int64_t>();
  T* op = out.data_ptr<T>();
  const int64_t qs0 = q.stride(0), qs1 = q.stride(1);
  const int64_t ks0 = k.stride(0), ks1 = k.stride(1);
  const int64_t vs0 = v.stride(0), vs1 = v.stride(1);
  const __m512 sc = _mm512_set1_ps(static_cast<float>(scale));
  const int64_t sl = cap + 1 + 16;  // a row of scores, with room for the vector tail
  // Partial results of the splits: [B * Hkv, S, G, D + 2] floats.
  std::vector<float> parts(S > 1 ? B * Hkv * S * G * (D + 2) : 0);
  at::parallel_for(0, B * Hkv * S, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> s(GB * sl);
    for (int64_t it = begin; it < end; ++it) {
      const int64_t bh = it / S, sp = it % S;
      const int64_t b = bh / Hkv, h = bh % Hkv;
      const int64_t n = std::min<int64_t>(lp[b], cap);  // block positions before own
      const int64_t chunk = (n + 1 + S - 1) / S;
      const int64_t j0 = std::min(n + 1, sp * chunk), j1 = std::min(n + 1, j0 + chunk);
      // The next item's block rows are fetched while this one is attended: the blocks are
      // cold in a decode step (the layer's weights streamed through the caches since).
      const T *nk = nullptr, *nv = nullptr;
      int64_t nn = 0;
      if (it + 1 < end) {
        const int64_t nbh = (it + 1) / S, nsp = (it + 1) % S;
        const int64_t n2 = std::min<int64_t>(lp[nbh / Hkv], cap);
        const int64_t c2 = (n2 + 1 + S - 1) / S;
        const int64_t a = std::min(n2, nsp * c2);
        nn = std::min(n2, a + c2) - a;
        if (nn > kPrefetchRows) nn = 0;
        nk = kdp + nbh * cap * D + a * D;
        nv = vdp + nbh * cap * D + a * D;
      }
      for (int64_t g0 = 0; g0 < G; g0 += GB)
        attend_group<T, NV, GB>(qp + b * qs0 + (h * G + g0) * qs1, qs1, kdp + bh * cap * D,
                                vdp + bh * cap * D, kp + b * ks0 + h * ks1,
                                vp + b * vs0 + h * vs1, n, j0, j1, sc, s.data(), sl,
                                op + (b * Hkv * G + h * G + g0) * D,
                                S > 1 ? &parts[((bh * S + sp) * G + g0) * (D + 2)] : nullptr,
                                nk, nv, g0 == 0 ? nn : 0);
    }
  });
  if (S == 1) return;
  at::parallel_for(0, B * Hkv * G, 1, [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      const int64_t bh = it / G, g = it % G;
      const float* p0 = &parts[(bh * S * G + g) * (D + 2)];  // split 0 of this head
      const int64_t step = G * (D + 2);  // to the next split
      float big = -std::numeric_limits<float>::infinity();
      for (int64_t sp = 0; sp < S; ++sp) big = std::max(big, p0[sp * step + D]);
      __m512 acc[NV];
      for (int i = 0; i < NV; ++i) acc[i] = _mm512_setzero_ps();
      float z = 0.f;
      for (int64_t sp = 0; sp < S; ++sp) {
        const float* ps = p0 + sp * step;
        if (ps[D + 1] == 0.f) continue;  // an empty split
        const float w = std::exp(ps[D] - big);
        z += w * ps[D + 1];
        for (int i = 0; i < NV; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(w), _mm512_loadu_ps(ps + i * 16), acc[i]);
      }
      const __m512 inv = _mm512_set1_ps(1.f / z);
      T* o = op + (bh * G + g) * D;  // out [B, H, D]: head h * G + g of sequence b
      for (int i = 0; i < NV; ++i) store16(o + i * 16, _mm512_mul_ps(acc[i], inv));
    }
  });
}

// Query heads per KV head, in the largest group of 8, 4, 2 or 1 that divides it.
template <typename T, int NV>
void decode_attention_g(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& kd, const at::Tensor& vd, const at::Tensor& lens,
                        double scale, int64_t splits, at::Tensor& out) {
  const int64_t G = q.size(1) / kd.size(1);
  if (G % 8 == 0 && NV <= 4)
    return decode_attention_impl<T, NV, 8>(q, k, v, kd, vd, lens, scale, splits, out);
  if (G % 4 == 0) return decode_attention_impl<T, NV, 4>(q, k, v, kd, vd, lens, scale, splits, out);
  if (G % 2 == 0) return decode_attention_impl<T, NV, 2>(q, k, v, kd, vd, lens, scale, splits, out);
  return decode_attention_impl<T, NV, 1>(q, k, v, kd, vd, lens, scale, splits, out);
}

template <typename T>
void decode_attention_d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& kd, const at::Tensor& vd, const at::Tensor& lens,
                        double scale, int64_t splits, at::Tensor& out) {
  switch (kd.size(3)) {
    case 64: return decode_attention_g<T, 4>(q, k, v, kd, vd, lens, scale, splits, out);
    case 128: return decode_attention_g<T, 8>(q, k, v, kd, vd, lens, scale, splits, out);
    case 256: return decode_attention_g<T, 16>(q, k, v, kd, vd, lens, scale, splits, out);
    default: TORCH_CHECK(false, "dense_decode_attention: head_dim ", kd.size(3), " unsupported");
  }
}

void check_float(const at::Tensor& t, at::ScalarType dt, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == dt, what, ": expected a CPU tensor of ",
              dt, ", got ", t.scalar_type(), " on ", t.device());
}

at::Tensor dense_decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& kd, const at::Tensor& vd,
                                  const at::Tensor& lens, double scale, int64_t splits) {
  const auto dt = q.scalar_type();
  TORCH_CHECK(splits >= 1 && splits <= 1024, "dense_decode_attention: splits ", splits);
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "dense_decode_attention: dtype ", dt);
  for (const auto* t : {&k, &v, &kd, &vd}) check_float(*t, dt, "dense_decode_attention");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && kd.dim() == 4 && vd.dim() == 4,
              "dense_decode_attention: q, k, v [B, heads, D]; kd, vd [B, Hkv, cap, D]");
  TORCH_CHECK(q.stride(2) == 1 && k.stride(2) == 1 && v.stride(2) == 1,
              "dense_decode_attention: rows of q, k, v must be contiguous");
  TORCH_CHECK(kd.sizes() == vd.sizes() && q.size(1) % kd.size(1) == 0,
              "dense_decode_attention: shapes disagree");
  TORCH_CHECK(lens.scalar_type() == at::kLong && lens.numel() == kd.size(0) && lens.is_contiguous(),
              "dense_decode_attention: lens must be [B] int64");
  auto out = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
  const auto kc = kd.contiguous(), vc = vd.contiguous();
  if (dt == at::kBFloat16)
    decode_attention_d<BFloat16>(q, k, v, kc, vc, lens, scale, splits, out);
  else
    decode_attention_d<float>(q, k, v, kc, vc, lens, scale, splits, out);
  return out;
}

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
      __m512 ss = _mm512_setzero_ps();
      for (int64_t i = 0; i < H; i += 16) {
        __m512 a = load16(xr + i);
        if (rp) {
          a = rnd<T>(_mm512_add_ps(a, load16(rp + n * rs + i)));
          store16(xr + i, a);
        }
        ss = _mm512_fmadd_ps(a, a, ss);
      }
      const float inv = 1.f / std::sqrt(hsum(ss) / static_cast<float>(H) + static_cast<float>(eps));
      const __m512 iv = _mm512_set1_ps(inv);
      T* yr = yp + n * H;
      for (int64_t i = 0; i < H; i += 16)
        store16(yr + i, _mm512_mul_ps(load16(wp + i), rnd<T>(_mm512_mul_ps(load16(xr + i), iv))));
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
        const __m512 lo = load16(x + i), hi = load16(x + half + i);
        const __m512 nlo = rnd<T>(_mm512_add_ps(rnd<T>(_mm512_mul_ps(lo, load16(c + i))),
                                                rnd<T>(_mm512_mul_ps(hi, load16(s + i)))));
        const __m512 nhi = rnd<T>(_mm512_add_ps(rnd<T>(_mm512_mul_ps(hi, load16(c + half + i))),
                                                rnd<T>(_mm512_mul_ps(lo, load16(s + half + i)))));
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
        const fVec x(load16(g + i));
        const fVec one(1.f);
        const __m512 act = rnd<T>(__m512(x / (one + x.neg().exp_u20())));
        store16(o + i, _mm512_mul_ps(act, load16(u + i)));
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
              "argmax_rows: x must be a CPU float32 [N, V > 0] matrix with contiguous rows");
  const int64_t N = x.size(0), V = x.size(1), xs = x.stride(0);
  auto out = at::empty({N}, x.options().dtype(at::kLong));
  const float* xp = x.data_ptr<float>();
  int64_t* op = out.data_ptr<int64_t>();
  at::parallel_for(0, N, 4, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* r = xp + n * xs;
      const int64_t V16 = V / 16 * 16;
      __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      __mmask16 nan = 0;
      for (int64_t i = 0; i < V16; i += 16) {
        const __m512 v = _mm512_loadu_ps(r + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        m = _mm512_max_ps(m, v);
      }
      float best = _mm512_reduce_max_ps(m);
      bool has_nan = nan != 0;
      for (int64_t i = V16; i < V; ++i) {
        has_nan |= std::isnan(r[i]);
        best = std::max(best, r[i]);
      }
      int64_t at = 0;
      if (has_nan) {
        while (!std::isnan(r[at])) ++at;
      } else {
        const __m512 b = _mm512_set1_ps(best);
        __mmask16 eq = 0;
        int64_t i = 0;
        for (; i < V16; i += 16)
          if ((eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(r + i), b, _CMP_EQ_OQ))) break;
        if (eq) {
          at = i + __builtin_ctz(eq);
        } else {
          at = V16;
          while (r[at] != best) ++at;
        }
      }
      op[n] = at;
    }
  });
  return out;
}

#if defined(__AVX512BF16__)
// ---------------------------------------------------------------------------------------
// bfloat16 GEMM for decode-sized batches: y [M, N] = x [M, K] @ w^T (+ bias), float32
// accumulation with AVX512-BF16 dot products (vdpbf16ps), rounded once to bf16.
// oneDNN's prepacked GEMM measured 17-36% slower at M <= 16 and 5% at M = 32 on this
// kernel's shapes (and 12% faster at M = 512, where the engine keeps it: engine.model.linear).
// w is packed once (pack_bf16_vnni) as [N/16][K/2][16][2]: for each 16 output columns, the
// K pairs that one vdpbf16ps multiplies with a broadcast pair of x.

at::Tensor pack_bf16_vnni(const at::Tensor& w) {
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == at::kBFloat16 && w.device().is_cpu(),
              "pack_bf16_vnni: w must be a CPU bfloat16 [N, K] matrix");
  const int64_t N = w.size(0), K = w.size(1);
  TORCH_CHECK(N % 16 == 0 && K % 2 == 0, "pack_bf16_vnni: N % 16 and K % 2 must be 0, got ",
              N, " x ", K);
  const auto wc = w.contiguous();
  auto out = at::empty({N / 16, K / 2, 16, 2}, w.options());
  const uint16_t* src = reinterpret_cast<const uint16_t*>(wc.data_ptr<BFloat16>());
  uint16_t* dst = reinterpret_cast<uint16_t*>(out.data_ptr<BFloat16>());
  at::parallel_for(0, N / 16, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nb = begin; nb < end; ++nb)
      for (int64_t kp = 0; kp < K / 2; ++kp)
        for (int64_t c = 0; c < 16; ++c)
          for (int64_t t = 0; t < 2; ++t)
            dst[((nb * (K / 2) + kp) * 16 + c) * 2 + t] = src[(nb * 16 + c) * K + kp * 2 + t];
  });
  return out;
}

// Prefetch of the weights a thread multiplies next, spread over the row passes of the
// current tile.  Measured on the 30M Llama's projections at 32 rows: 2-8% less time where
// the weights sit in the L3, none where a step streams them from DRAM (its 52 MB do not
// fit: one step's GEMMs then take ~1.4 ms longer than their arithmetic whatever the
// prefetch distance, hint or page size tried).  Up to two runs of 64-byte
// lines (the next tile's blocks: one run in a plain GEMM, gate's and up's in the SwiGLU
// one), `per_iter` lines of each per k step from line `begin` on.
struct Prefetch {
  const char* base[2] = {nullptr, nullptr};
  int64_t lines[2] = {0, 0};
  int64_t begin = 0, per_iter = 0;
  inline void at(int64_t kp) const {
    for (int r = 0; r < 2; ++r)
      for (int64_t u = 0, l = begin + kp * per_iter; u < per_iter && l < lines[r]; ++u, ++l)
        _mm_prefetch(base[r] + l * 64, _MM_HINT_T0);
  }
};

// MR rows of x times NR blocks of 16 columns (w[j]: a packed block, KP steps of 32 bf16),
// accumulated over all of K in registers from bias[j] (or 0), then epi(i, acc[i]) per row.
template <int MR, int NR, typename Epi>
inline void gemm_tile(const BFloat16* x, int64_t xs, int64_t KP, const uint16_t* const* w,
                      const float* const* bias, const Prefetch& pf, const Epi& epi) {
  __m512 acc[MR][NR];
  for (int j = 0; j < NR; ++j) {
    const __m512 b0 = bias[j] ? _mm512_loadu_ps(bias[j]) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) acc[i][j] = b0;
  }
  for (int64_t kp = 0; kp < KP; ++kp) {
    pf.at(kp);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w[j] + kp * 32);
    for (int i = 0; i < MR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(
          *reinterpret_cast<const int32_t*>(x + i * xs + kp * 2));
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], a, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i) epi(i, acc[i]);
}

// All M rows of x against one tile of NR blocks, in row tiles of 8, 4, 2 and 1; the
// prefetch of the next tile's `next_lines` lines (per run) is spread over all of them.
// epi(row, acc) stores a row's NR accumulators.
template <int NR, int MR = 8, typename Epi>
inline void gemm_rows(const BFloat16* x, int64_t xs, int64_t M, int64_t KP,
                      const uint16_t* const* w, const float* const* bias, Prefetch pf,
                      const Epi& epi) {
  const int64_t passes = M / MR + (M % MR >= 4) + (M % 4 >= 2) + M % 2;
  const int64_t iters = std::max<int64_t>(1, passes) * KP;
  pf.per_iter = (std::max(pf.lines[0], pf.lines[1]) + iters - 1) / iters;
  int64_t m = 0;
  auto tile = [&](auto rows) {
    constexpr int R = decltype(rows)::value;
    const int64_t m0 = m;
    gemm_tile<R, NR>(x + m0 * xs, xs, KP, w, bias, pf,
                     [&](int i, const __m512* a) { epi(m0 + i, a); });
    m += R;
    pf.begin += KP * pf.per_iter;
  };
  while (m + MR <= M) tile(std::integral_constant<int, MR>{});
  if (m + 4 <= M) tile(std::integral_constant<int, 4>{});
  if (m + 2 <= M) tile(std::integral_constant<int, 2>{});
  if (m < M) tile(std::integral_constant<int, 1>{});
}

// The checks and views both GEMMs share: x [M, K] bf16 rows, wp from pack_bf16_vnni of an
// [N, K] weight, the bias as float32 (no copy for the fp32 bias Linear keeps).
struct GemmArgs {
  int64_t M, K, KP, NB, xs;
  const BFloat16* x;
  const uint16_t* w;
  at::Tensor bias;
  const float* b;
  const uint16_t* block(int64_t nb) const { return w + nb * KP * 32; }
  const float* bias_of(int64_t nb) const { return b ? b + nb * 16 : nullptr; }
};

GemmArgs gemm_args(const char* op, const at::Tensor& x, const at::Tensor& wp,
                   const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kBFloat16 && x.device().is_cpu()
                  && x.stride(1) == 1,
              op, ": x must be a CPU bfloat16 [M, K] matrix with contiguous rows");
  TORCH_CHECK(wp.dim() == 4 && wp.scalar_type() == at::kBFloat16 && wp.is_contiguous()
                  && wp.size(2) == 16 && wp.size(3) == 2 && wp.size(1) * 2 == x.size(1),
              op, ": wp must come from pack_bf16_vnni of a [N, ", x.size(1), "] weight");
  GemmArgs g{x.size(0), x.size(1), x.size(1) / 2, wp.size(0), x.stride(0), x.data_ptr<BFloat16>(),
             reinterpret_cast<const uint16_t*>(wp.data_ptr<BFloat16>()), {}, nullptr};
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->numel() == g.NB * 16, op, ": bias of ", bias->numel(), " for ",
                g.NB * 16, " outputs");
    g.bias = bias->to(at::kFloat).contiguous();
    g.b = g.bias.data_ptr<float>();
  }
  return g;
}

at::Tensor linear_bf16(const at::Tensor& x, const at::Tensor& wp,
                       const c10::optional<at::Tensor>& bias) {
  const GemmArgs g = gemm_args("linear_bf16", x, wp, bias);
  const int64_t N = g.NB * 16;
  auto y = at::empty({g.M, N}, x.options());
  BFloat16* yp = y.data_ptr<BFloat16>();
  // Each thread takes an even share of the 16-column blocks (tiles split over threads left
  // one thread 6 tiles and the other 5 on N = 512) and runs them as tiles of 3 blocks
  // (8 x 3 accumulators + 3 weight vectors fit the 32 registers), all of x's rows per
  // tile, so a tile's weights come from DRAM once, prefetched during the tile before.
  at::parallel_for(0, g.NB, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nb0 = begin; nb0 < end; nb0 += 3) {
      const int64_t nr = std::min<int64_t>(3, end - nb0);
      const uint16_t* w[3];
      const float* b[3];
      for (int64_t j = 0; j < nr; ++j) w[j] = g.block(nb0 + j), b[j] = g.bias_of(nb0 + j);
      Prefetch pf;  // the next tile's blocks follow this one's in memory
      pf.base[0] = reinterpret_cast<const char*>(g.block(nb0 + nr));
      pf.lines[0] = (std::min<int64_t>(end, nb0 + nr + 3) - nb0 - nr) * g.KP;
      auto run = [&](auto blocks) {
        constexpr int NR = decltype(blocks)::value;
        gemm_rows<NR>(g.x, g.xs, g.M, g.KP, w, b, pf, [&](int64_t r, const __m512* a) {
          for (int j = 0; j < NR; ++j) store16(yp + r * N + (nb0 + j) * 16, a[j]);
        });
      };
      if (nr == 3) run(std::integral_constant<int, 3>{});
      else if (nr == 2) run(std::integral_constant<int, 2>{});
      else run(std::integral_constant<int, 1>{});
    }
  });
  return y;
}

// The fused gate/up projection with SwiGLU in its epilogue: x [M, K] against the packed
// [2I, K] weight (gate rows, then up rows) -> T(T(silu(T(gate))) * T(up)) [M, I], the
// bits of linear_bf16 then silu_mul, without the [M, 2I] round trip through memory.  A
// tile is one 16-column block of gate and the matching one of up.
at::Tensor linear_bf16_silu(const at::Tensor& x, const at::Tensor& wp,
                            const c10::optional<at::Tensor>& bias) {
  const GemmArgs g = gemm_args("linear_bf16_silu", x, wp, bias);
  TORCH_CHECK(g.NB % 2 == 0, "linear_bf16_silu: the weight's ", g.NB * 16,
              " rows are not gate and up halves of a multiple of 16");
  const int64_t half = g.NB / 2, I = half * 16;
  auto y = at::empty({g.M, I}, x.options());
  BFloat16* yp = y.data_ptr<BFloat16>();
  // Tiles of two blocks of gate and the two matching ones of up: 6 x 4 accumulators.
  at::parallel_for(0, half, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; p += 2) {
      const int64_t np = std::min<int64_t>(2, end - p);
      const uint16_t* w[4] = {g.block(p), g.block(p + 1), g.block(half + p), g.block(half + p + 1)};
      const float* b[4] = {g.bias_of(p), g.bias_of(p + 1), g.bias_of(half + p),
                           g.bias_of(half + p + 1)};
      Prefetch pf;  // the next tile's gate blocks, and its up blocks
      pf.base[0] = reinterpret_cast<const char*>(g.block(p + np));
      pf.base[1] = reinterpret_cast<const char*>(g.block(half + p + np));
      pf.lines[0] = pf.lines[1] = (std::min<int64_t>(end, p + np + 2) - p - np) * g.KP;
      auto swiglu = [&](__m512 gate_acc, __m512 up_acc) {
        const fVec gate(rnd<BFloat16>(gate_acc)), one(1.f);
        const __m512 act = rnd<BFloat16>(__m512(gate / (one + gate.neg().exp_u20())));
        return _mm512_mul_ps(act, rnd<BFloat16>(up_acc));
      };
      if (np == 2) {
        gemm_rows<4, 6>(g.x, g.xs, g.M, g.KP, w, b, pf, [&](int64_t r, const __m512* a) {
          store16(yp + r * I + p * 16, swiglu(a[0], a[2]));
          store16(yp + r * I + p * 16 + 16, swiglu(a[1], a[3]));
        });
      } else {
        const uint16_t* w2[2] = {w[0], w[2]};
        const float* b2[2] = {b[0], b[2]};
        gemm_rows<2>(g.x, g.xs, g.M, g.KP, w2, b2, pf, [&](int64_t r, const __m512* a) {
          store16(yp + r * I + p * 16, swiglu(a[0], a[1]));
        });
      }
    }
  });
  return y;
}

#endif  // __AVX512BF16__

// ---------------------------------------------------------------------------------------
// torch's oneDNN GEMM on a weight prepacked by mkldnn::_reorder_linear_weight, called as
// engine.model.linear.Linear.forward calls it (mkldnn::_linear_pointwise, no fused
// activation): the same op, so the same bits.  Boxed, so this file does not depend on how
// one torch release spells the op's C++ signature.
at::Tensor onednn_linear(const at::Tensor& x, const at::Tensor& packed,
                         const c10::optional<at::Tensor>& bias) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn::_linear_pointwise", "");
  torch::jit::Stack stack;
  stack.reserve(6);
  stack.emplace_back(x);
  stack.emplace_back(packed);
  stack.emplace_back(bias.has_value() ? c10::IValue(*bias) : c10::IValue());
  stack.emplace_back(std::string("none"));
  stack.emplace_back(c10::List<c10::optional<at::Scalar>>());
  stack.emplace_back(c10::IValue());
  op.callBoxed(&stack);
  return stack[0].toTensor();
}

// One projection of the stack below: the kernels' GEMM (VNNI-packed weight) or oneDNN's.
at::Tensor project(const at::Tensor& x, const at::Tensor& w,
                   const c10::optional<at::Tensor>& bias, bool onednn) {
  if (onednn) return onednn_linear(x, w, bias);
#if defined(__AVX512BF16__)
  return linear_bf16(x, w, bias);
#else
  TORCH_CHECK(false, "decode_layers: built without AVX512-BF16, the kernels' GEMM is missing");
#endif
}

at::Tensor gate_up_silu(const at::Tensor& x, const at::Tensor& w, bool onednn) {
  if (onednn) return silu_mul(onednn_linear(x, w, {}));
#if defined(__AVX512BF16__)
  return linear_bf16_silu(x, w, {});
#else
  TORCH_CHECK(false, "decode_layers: built without AVX512-BF16, the kernels' GEMM is missing");
#endif
}

// Layer l's K and V rows of the step (qkv's columns [q_size, q_size + 2 kv_size), K
// rotated already) into new_kv [L, 2, B, Hkv, D]: plain row copies.  Two
// ``new_kv[l][i].copy_(k)`` went through six dispatched ops (selects, TensorIterator
// copies) for 2 x B rows of 256 bytes: measured in the stack at c16 on the 30M Llama,
// ~100 us of a 3.2 ms step, ~20 us this way.
void copy_new_kv(at::Tensor& new_kv, const at::Tensor& qkv, int64_t l, int64_t q_size,
                 int64_t kv_size) {
  const int64_t B = qkv.size(0), es = qkv.element_size();
  const int64_t row = kv_size * es, src_stride = qkv.stride(0) * es;
  TORCH_CHECK(qkv.stride(1) == 1 && new_kv.is_contiguous() && new_kv.size(2) == B
                  && new_kv.element_size() == es && new_kv.size(3) * new_kv.size(4) == kv_size,
              "decode_layers: qkv rows and new_kv disagree");
  const char* src = static_cast<const char*>(qkv.data_ptr()) + q_size * es;
  char* k_dst = static_cast<char*>(new_kv.data_ptr()) + l * 2 * B * row;
  char* v_dst = k_dst + B * row;
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(k_dst + b * row, src + b * src_stride, row);
    std::memcpy(v_dst + b * row, src + b * src_stride + row, row);
  }
}

// ---------------------------------------------------------------------------------------
// The decoder stack of a dense decode step in one call: DecoderLayer.decode_dense's ops,
// layer after layer, the same functions in the same order (so the same bits) without the
// ~8 trips a layer makes through Python, nn.Module and the dispatcher (measured at c32 on
// the 30M Llama: ~1 ms of a ~7.5 ms step).  x [B, hidden] is the residual stream (updated
// in place); per layer: the two norm weights, the qkv weight (with its optional bias), o,
// gate/up and down weights, and the K and V blocks [B, Hkv, cap, D].  ``onednn``: every
// weight is prepacked for oneDNN (float32 or bfloat16), else VNNI-packed for the kernels'
// bf16 GEMM (and the qkv bias float32, as that GEMM takes it).  Returns the last layer's
// MLP output (for the final norm to add) and the new token's K and V of every layer,
// [layers, 2, B, Hkv, D].
std::tuple<at::Tensor, at::Tensor> decode_layers(
    at::Tensor x, at::TensorList in_norm, at::TensorList qkv_w,
    const c10::List<c10::optional<at::Tensor>>& qkv_bias, at::TensorList o_w,
    at::TensorList post_norm, at::TensorList gate_up_w, at::TensorList down_w,
    at::TensorList k_blocks, at::TensorList v_blocks, const at::Tensor& lens,
    const at::Tensor& cos, const at::Tensor& sin, int64_t heads, int64_t kv_heads, double eps,
    double scale, int64_t splits, bool onednn) {
  const int64_t L = static_cast<int64_t>(in_norm.size());
  TORCH_CHECK(L > 0 && qkv_w.size() == in_norm.size() && qkv_bias.size() == in_norm.size()
                  && o_w.size() == in_norm.size() && post_norm.size() == in_norm.size()
                  && gate_up_w.size() == in_norm.size() && down_w.size() == in_norm.size()
                  && k_blocks.size() == in_norm.size() && v_blocks.size() == in_norm.size(),
              "decode_layers: one of each weight and block per layer");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && heads > 0 && kv_heads > 0
                  && heads % kv_heads == 0 && k_blocks[0].dim() == 4,
              "decode_layers: x [B, hidden] contiguous, heads a multiple of kv_heads");
  const int64_t B = x.size(0), D = k_blocks[0].size(3);
  const int64_t q_size = heads * D, kv_size = kv_heads * D;
  auto new_kv = at::empty({L, 2, B, kv_heads, D}, x.options());
  at::Tensor delta;
  for (int64_t l = 0; l < L; ++l) {
    at::Tensor h = l == 0 ? rmsnorm_common(x, nullptr, in_norm[l], eps)
                          : rmsnorm_common(x, &delta, in_norm[l], eps);
    at::Tensor qkv = project(h, qkv_w[l], qkv_bias.get(l), onednn);
    TORCH_CHECK(qkv.size(1) == q_size + 2 * kv_size, "decode_layers: layer ", l,
                ": qkv of ", qkv.size(1), " columns for ", heads, "/", kv_heads, " heads of ", D);
    rope_(qkv, cos, sin, heads + kv_heads, D);
    const at::Tensor q = qkv.narrow(1, 0, q_size).view({B, heads, D});
    const at::Tensor k = qkv.narrow(1, q_size, kv_size).view({B, kv_heads, D});
    const at::Tensor v = qkv.narrow(1, q_size + kv_size, kv_size).view({B, kv_heads, D});
    const at::Tensor a = dense_decode_attention(q, k, v, k_blocks[l], v_blocks[l], lens, scale,
                                                splits);
    const at::Tensor o = project(a.view({B, q_size}), o_w[l], {}, onednn);
    const at::Tensor h2 = rmsnorm_common(x, &o, post_norm[l], eps);
    delta = project(gate_up_silu(h2, gate_up_w[l], onednn), down_w[l], {}, onednn);
    copy_new_kv(new_kv, qkv, l, q_size, kv_size);
  }
  return {delta, new_kv};
}

}  // namespace

TORCH_LIBRARY(knob_engine, m) {
  m.def("dense_decode_attention(Tensor q, Tensor k, Tensor v, Tensor kd, Tensor vd, "
        "Tensor lens, float scale, int splits=1) -> Tensor");
  m.def("rmsnorm(Tensor x, Tensor w, float eps) -> Tensor");
  m.def("add_rmsnorm_(Tensor(a!) x, Tensor residual, Tensor w, float eps) -> Tensor");
  m.def("rope_(Tensor(a!) qkv, Tensor cos, Tensor sin, int heads, int head_dim) -> ()");
  m.def("silu_mul(Tensor gu) -> Tensor");
  m.def("copy_rows_(Tensor(a!) dst, Tensor index, Tensor src) -> ()");
  m.def("argmax_rows(Tensor x) -> Tensor");
#if defined(__AVX512BF16__)
  m.def("pack_bf16_vnni(Tensor w) -> Tensor");
  m.def("linear_bf16(Tensor x, Tensor wp, Tensor? bias) -> Tensor");
  m.def("linear_bf16_silu(Tensor x, Tensor wp, Tensor? bias) -> Tensor");
#endif
  m.def("decode_layers(Tensor(a!) x, Tensor[] in_norm, Tensor[] qkv, Tensor?[] qkv_bias, "
        "Tensor[] o, Tensor[] post_norm, Tensor[] gate_up, Tensor[] down, Tensor[] k_blocks, "
        "Tensor[] v_blocks, Tensor lens, Tensor cos, Tensor sin, int heads, int kv_heads, "
        "float eps, float scale, int splits, bool onednn) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(knob_engine, CPU, m) {
  m.impl("dense_decode_attention", &dense_decode_attention);
  m.impl("rmsnorm", &rmsnorm);
  m.impl("add_rmsnorm_", &add_rmsnorm_);
  m.impl("rope_", &rope_);
  m.impl("silu_mul", &silu_mul);
  m.impl("copy_rows_", &copy_rows_);
  m.impl("argmax_rows", &argmax_rows);
#if defined(__AVX512BF16__)
  m.impl("pack_bf16_vnni", &pack_bf16_vnni);
  m.impl("linear_bf16", &linear_bf16);
  m.impl("linear_bf16_silu", &linear_bf16_silu);
#endif
  m.impl("decode_layers", &decode_layers);
}

// oneDNN's prepacked float32 weights are MkldnnCPU tensors: the stack takes them too (it
// hands them only to mkldnn::_linear_pointwise).
TORCH_LIBRARY_IMPL(knob_engine, MkldnnCPU, m) {
  m.impl("decode_layers", &decode_layers);
}
