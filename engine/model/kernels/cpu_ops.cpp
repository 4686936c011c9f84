// Fused CPU kernels around the engine model's GEMMs (float32 and bfloat16), and a bfloat16
// GEMM for decode-sized batches, in three compiled variants of this one source:
//
//   -DKERNEL_ISA_AVX512   AVX-512 (16 float lanes; the GEMM on AVX512-BF16 dot products
//                         where the compiler targets them, widened bf16 + FMA otherwise)
//   -DKERNEL_ISA_AVX2     AVX2 + FMA (two 8-lane halves; bf16 widened and narrowed in
//                         registers: a 16-bit shift up, round-to-nearest-even down)
//   -DKERNEL_ISA_PORTABLE plain C++ loops over 16 floats that the compiler vectorises for
//                         whatever it targets (x86-64 baseline, aarch64, ...)
//
// Every kernel is written once against the 16-lane vector V below; each variant defines
// V and its operations.  Within a variant a row's result never depends on the other rows
// of the batch (every reduction has one order per row); the variants' bits differ from one
// another only where a float32 sum is ordered differently, an FMA is two roundings in the
// portable loops, or an exp is another polynomial.
//
// Each op replaces a chain of small eager torch ops whose per-op dispatch, allocation and
// memory round trips cost more than their arithmetic at decode batch sizes; each has a
// torch reference (engine/model/kernels/__init__.py; the GEMM's is float64 math) that
// tests/engine/test_engine_kernels.py compares it against.  bfloat16 results are rounded
// where the reference (and Hugging Face's Llama) rounds, so the kernels and the reference
// agree to the last bit except where a float32 sum or exp is ordered differently.
//
// Built at run time by torch.utils.cpp_extension (engine/model/kernels/__init__.py), one
// build per variant; registered as torch.ops.<KERNEL_NS>.* (knob_engine_avx512, ...: one
// torch library namespace per variant, so several variants can live in one process).

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(KERNEL_ISA_AVX512) || defined(KERNEL_ISA_AVX2)
#include <ATen/cpu/vec/vec.h>
#include <immintrin.h>
#elif !defined(KERNEL_ISA_PORTABLE)
#error "compile with -DKERNEL_ISA_AVX512, -DKERNEL_ISA_AVX2 or -DKERNEL_ISA_PORTABLE"
#endif
#ifndef KERNEL_NS
#define KERNEL_NS knob_engine
#endif

namespace {

using at::BFloat16;

inline float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// float32 -> bfloat16 bits, round to nearest even (c10::BFloat16's rounding; NaN stays NaN).
inline uint16_t float_to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
inline void prefetch_line(const char* p) { __builtin_prefetch(p, 0, 3); }

#if defined(KERNEL_ISA_AVX512)
// ---- AVX-512: V is one zmm register.
using V = __m512;
using fVec = at::vec::Vectorized<float>;
inline V vzero() { return _mm512_setzero_ps(); }
inline V vset1(float x) { return _mm512_set1_ps(x); }
inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
inline V vfmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V vneg(V a) { return __m512(fVec(a).neg()); }
inline V vexp(V a) { return __m512(fVec(a).exp_u20()); }
inline float hsum(V x) { return _mm512_reduce_add_ps(x); }
inline float hmax(V x) { return _mm512_reduce_max_ps(x); }
inline unsigned nan_mask(V x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
inline unsigned eq_mask(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
// The first c lanes of p (the rest 0), and stores of the first c lanes.
inline V loadn(const float* p, int64_t c) { return __m512(fVec::loadu(p, c)); }
inline void storen(float* p, V x, int64_t c) { fVec(x).store(p, c); }
inline V keep_first(V x, int64_t c) { return __m512(fVec::set(fVec(0.f), fVec(x), c)); }
inline V load16(const float* p) { return _mm512_loadu_ps(p); }
inline V load16(const BFloat16* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m256i to_bf16_bits(V x) {
  __m512i i = _mm512_castps_si512(x);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(i, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(_mm512_add_epi32(i, _mm512_set1_epi32(0x7fff)), lsb);
  r = _mm512_srli_epi32(r, 16);
  __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}
inline void store16(float* p, V x) { _mm512_storeu_ps(p, x); }
inline void store16(BFloat16* p, V x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_bits(x));
}
inline V round_bf16(V x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(to_bf16_bits(x)), 16));
}
// A packed GEMM block's step: 16 columns x a pair of k (32 bf16), widened to the even and
// the odd k's 16 floats (the low and the high half of each 32-bit pair).
inline void widen_pairs(const uint16_t* w, V& even, V& odd) {
  const __m512i v = _mm512_loadu_si512(w);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
}

#elif defined(KERNEL_ISA_AVX2)
// ---- AVX2 + FMA: V is two ymm registers (lanes 0-7, 8-15).
struct V { __m256 lo, hi; };
using fVec8 = at::vec::Vectorized<float>;
static_assert(fVec8::size() == 8, "an AVX2 build of torch's Vectorized<float> has 8 lanes");
inline V vzero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V vset1(float x) { const __m256 a = _mm256_set1_ps(x); return {a, a}; }
inline V vadd(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V vsub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V vmul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V vdiv(V a, V b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline V vmax(V a, V b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline V vfmadd(V a, V b, V c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline V vneg(V a) {
  const __m256 s = _mm256_set1_ps(-0.f);
  return {_mm256_xor_ps(a.lo, s), _mm256_xor_ps(a.hi, s)};
}
inline V vexp(V a) { return {__m256(fVec8(a.lo).exp_u20()), __m256(fVec8(a.hi).exp_u20())}; }
inline float hsum8(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hsum(V x) { return hsum8(_mm256_add_ps(x.lo, x.hi)); }
inline float hmax(V x) {
  __m256 m = _mm256_max_ps(x.lo, x.hi);
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline unsigned nan_mask(V x) {
  return unsigned(_mm256_movemask_ps(_mm256_cmp_ps(x.lo, x.lo, _CMP_UNORD_Q)))
         | unsigned(_mm256_movemask_ps(_mm256_cmp_ps(x.hi, x.hi, _CMP_UNORD_Q))) << 8;
}
inline unsigned eq_mask(V a, V b) {
  return unsigned(_mm256_movemask_ps(_mm256_cmp_ps(a.lo, b.lo, _CMP_EQ_OQ)))
         | unsigned(_mm256_movemask_ps(_mm256_cmp_ps(a.hi, b.hi, _CMP_EQ_OQ))) << 8;
}
inline V load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline __m256 widen8(const BFloat16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline V load16(const BFloat16* p) { return {widen8(p), widen8(p + 8)}; }
inline V loadn(const float* p, int64_t c) {
  alignas(32) float t[16] = {0.f};
  std::memcpy(t, p, c * sizeof(float));
  return load16(t);
}
inline void storen(float* p, V x, int64_t c) {
  alignas(32) float t[16];
  _mm256_store_ps(t, x.lo);
  _mm256_store_ps(t + 8, x.hi);
  std::memcpy(p, t, c * sizeof(float));
}
inline V keep_first(V x, int64_t c) {
  alignas(32) float t[16];
  _mm256_store_ps(t, x.lo);
  _mm256_store_ps(t + 8, x.hi);
  for (int64_t i = c; i < 16; ++i) t[i] = 0.f;
  return load16(t);
}
// 8 floats -> their bf16 bits as 32-bit lanes (each < 2^16), round to nearest even.
inline __m256i bf16_bits8(__m256 x) {
  const __m256i i = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(i, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(_mm256_add_epi32(i, _mm256_set1_epi32(0x7fff)), lsb);
  r = _mm256_srli_epi32(r, 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
}
inline __m128i pack8(__m256i r) {  // 32-bit lanes < 2^16 -> 8 x 16 bits, in order
  const __m256i p = _mm256_packus_epi32(r, r);  // [0-3 0-3 | 4-7 4-7] per 128-bit half
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0xD8));
}
inline void store16(float* p, V x) { _mm256_storeu_ps(p, x.lo); _mm256_storeu_ps(p + 8, x.hi); }
inline void store16(BFloat16* p, V x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack8(bf16_bits8(x.lo)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8), pack8(bf16_bits8(x.hi)));
}
inline V round_bf16(V x) {
  return {_mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits8(x.lo), 16)),
          _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits8(x.hi), 16))};
}
inline void widen_pairs(const uint16_t* w, V& even, V& odd) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16));
  const __m256i hi = _mm256_set1_epi32(int(0xffff0000u));
  even = {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)),
          _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
  odd = {_mm256_castsi256_ps(_mm256_and_si256(a, hi)), _mm256_castsi256_ps(_mm256_and_si256(b, hi))};
}

#else
// ---- Portable: V is 16 floats; plain loops the compiler vectorises for its target.  A
// multiply-add is two roundings here (-ffp-contract=off: the same bits whatever the target
// fuses), the exp is std::exp.
struct V { float f[16]; };
#define KNOB_LANES(expr) V r; for (int l = 0; l < 16; ++l) r.f[l] = (expr); return r
inline V vzero() { KNOB_LANES(0.f); }
inline V vset1(float x) { KNOB_LANES(x); }
inline V vadd(V a, V b) { KNOB_LANES(a.f[l] + b.f[l]); }
inline V vsub(V a, V b) { KNOB_LANES(a.f[l] - b.f[l]); }
inline V vmul(V a, V b) { KNOB_LANES(a.f[l] * b.f[l]); }
inline V vdiv(V a, V b) { KNOB_LANES(a.f[l] / b.f[l]); }
inline V vmax(V a, V b) { KNOB_LANES(a.f[l] > b.f[l] ? a.f[l] : b.f[l]); }
inline V vfmadd(V a, V b, V c) { KNOB_LANES(a.f[l] * b.f[l] + c.f[l]); }
inline V vneg(V a) { KNOB_LANES(-a.f[l]); }
inline V vexp(V a) { KNOB_LANES(std::exp(a.f[l])); }
inline float hsum(V x) {  // pairwise, like the vector variants' tree
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = x.f[l] + x.f[l + 8];
  for (int l = 0; l < 4; ++l) s[l] += s[l + 4];
  return (s[0] + s[2]) + (s[1] + s[3]);
}
inline float hmax(V x) {
  float m = x.f[0];
  for (int l = 1; l < 16; ++l) m = std::max(m, x.f[l]);
  return m;
}
inline unsigned nan_mask(V x) {
  unsigned m = 0;
  for (int l = 0; l < 16; ++l) m |= unsigned(std::isnan(x.f[l])) << l;
  return m;
}
inline unsigned eq_mask(V a, V b) {
  unsigned m = 0;
  for (int l = 0; l < 16; ++l) m |= unsigned(a.f[l] == b.f[l]) << l;
  return m;
}
inline V loadn(const float* p, int64_t c) { KNOB_LANES(l < c ? p[l] : 0.f); }
inline void storen(float* p, V x, int64_t c) { std::memcpy(p, x.f, c * sizeof(float)); }
inline V keep_first(V x, int64_t c) { KNOB_LANES(l < c ? x.f[l] : 0.f); }
inline V load16(const float* p) { KNOB_LANES(p[l]); }
inline V load16(const BFloat16* p) {
  const uint16_t* b = reinterpret_cast<const uint16_t*>(p);
  KNOB_LANES(bf16_to_float(b[l]));
}
inline void store16(float* p, V x) { std::memcpy(p, x.f, sizeof(x.f)); }
inline void store16(BFloat16* p, V x) {
  uint16_t* b = reinterpret_cast<uint16_t*>(p);
  for (int l = 0; l < 16; ++l) b[l] = float_to_bf16(x.f[l]);
}
inline V round_bf16(V x) { KNOB_LANES(bf16_to_float(float_to_bf16(x.f[l]))); }
inline void widen_pairs(const uint16_t* w, V& even, V& odd) {
  for (int l = 0; l < 16; ++l) {
    even.f[l] = bf16_to_float(w[2 * l]);
    odd.f[l] = bf16_to_float(w[2 * l + 1]);
  }
}
#undef KNOB_LANES
#endif

// The value x takes when stored as T (identity for float32).
inline V round_as(V x, const float*) { return x; }
inline V round_as(V x, const BFloat16*) { return round_bf16(x); }
template <typename T>
inline V rnd(V x) { return round_as(x, static_cast<const T*>(nullptr)); }


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
    prefetch_line(reinterpret_cast<const char*>(row) + l * 64);
}

// Row j of "block rows 0..n-1, then the own token's row" as NV float32 vectors, row r of
// the next item's block prefetched while it lasts (its first nn rows).
template <typename T, int NV>
inline void load_row(const T* block, const T* own, int64_t n, int64_t j, const T* next,
                     int64_t r, int64_t nn, V* out) {
  constexpr int64_t D = NV * 16;
  if (r < nn) prefetch_row<T, D>(next + r * D);
  const T* row = j < n ? block + j * D : own;
  for (int i = 0; i < NV; ++i) out[i] = load16(row + i * 16);
}

template <typename T, int NV, int GB>
inline void attend_group(const T* q, int64_t q_stride, const T* kb, const T* vb,
                         const T* kown, const T* vown, int64_t n, int64_t j0, int64_t j1,
                         V sc, float* s, int64_t sl, T* o, float* part,
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
  V qv[GB][NV];
  for (int g = 0; g < GB; ++g)
    for (int i = 0; i < NV; ++i) qv[g][i] = vmul(load16(q + g * q_stride + i * 16), sc);
  // Scores, float32 (the own token is position n).
  for (int64_t j = j0; j < j1; ++j) {
    V kv[NV];
    load_row<T, NV>(kb, kown, n, j, nk, j - j0, nn, kv);
    for (int g = 0; g < GB; ++g) {
      V a = vmul(qv[g][0], kv[0]);
      for (int i = 1; i < NV; ++i) a = vfmadd(qv[g][i], kv[i], a);
      s[g * sl + j - j0] = hsum(a);
    }
  }
  float mx[GB], z[GB];
  for (int g = 0; g < GB; ++g) {
    float* sg = s + g * sl;
    float m = sg[0];
    for (int64_t j = 1; j < len; ++j) m = std::max(m, sg[j]);
    const V mv = vset1(m);
    V zv = vzero();
    for (int64_t j = 0; j < len; j += 16) {
      const int64_t c = std::min<int64_t>(16, len - j);
      V e = vexp(vsub(loadn(sg + j, c), mv));
      if (c < 16) e = keep_first(e, c);
      storen(sg + j, e, c);
      zv = vadd(zv, e);
    }
    mx[g] = m;
    z[g] = hsum(zv);
  }
  V acc[GB][NV];
  for (int g = 0; g < GB; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = vzero();
  for (int64_t j = j0; j < j1; ++j) {
    V vv[NV];
    load_row<T, NV>(vb, vown, n, j, nv, j - j0, nn, vv);
    for (int g = 0; g < GB; ++g) {
      const V p = vset1(s[g * sl + j - j0]);
      for (int i = 0; i < NV; ++i) acc[g][i] = vfmadd(p, vv[i], acc[g][i]);
    }
  }
  for (int g = 0; g < GB; ++g) {
    if (part == nullptr) {
      const V inv = vset1(1.f / z[g]);
      for (int i = 0; i < NV; ++i) store16(o + g * D + i * 16, vmul(acc[g][i], inv));
    } else {
      float* pg = part + g * (D + 2);
      for (int i = 0; i < NV; ++i) store16(pg + i * 16, acc[g][i]);
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
  const V sc = vset1(static_cast<float>(scale));
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
      V acc[NV];
      for (int i = 0; i < NV; ++i) acc[i] = vzero();
      float z = 0.f;
      for (int64_t sp = 0; sp < S; ++sp) {
        const float* ps = p0 + sp * step;
        if (ps[D + 1] == 0.f) continue;  // an empty split
        const float w = std::exp(ps[D] - big);
        z += w * ps[D + 1];
        for (int i = 0; i < NV; ++i)
          acc[i] = vfmadd(vset1(w), load16(ps + i * 16), acc[i]);
      }
      const V inv = vset1(1.f / z);
      T* o = op + (bh * G + g) * D;  // out [B, H, D]: head h * G + g of sequence b
      for (int i = 0; i < NV; ++i) store16(o + i * 16, vmul(acc[i], inv));
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

// ---------------------------------------------------------------------------------------
// bfloat16 GEMM for decode-sized batches: y [M, N] = x [M, K] @ w^T (+ bias), float32
// accumulation with AVX512-BF16 dot products (vdpbf16ps) where the build targets them, else
// each k pair's weights widened to float32 in registers and multiplied with FMA (AVX2, the
// portable loops, AVX-512 without BF16); rounded once to bf16.
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
        prefetch_line(base[r] + l * 64);
  }
};

// Tile shapes: rows of x per pass and 16-column blocks per tile (of a plain GEMM; of gate
// and of up in the SwiGLU one), as many accumulators as the variant's registers hold: 32
// zmm for AVX-512 (8 x 3 accumulators), 16 ymm for AVX2 (4 rows x 1 block of 2 ymm, plus
// the widened weights).
#if defined(KERNEL_ISA_AVX512)
constexpr int kRowTile = 8, kLinBlocks = 3, kSiluPairs = 2;
#else
constexpr int kRowTile = 4, kLinBlocks = 1, kSiluPairs = 1;
#endif

// x as the tiles read it: bf16 pairs for the dot products; else float32, widened once per
// call (measured: converting and broadcasting a bf16 of x per k and row cost more than the
// FMAs on AVX2), so each k of a row is one broadcast from memory.
#if defined(__AVX512BF16__)
using XElem = BFloat16;
#else
using XElem = float;
#endif

// MR rows of x times NR blocks of 16 columns (w[j]: a packed block, KP steps of 32 bf16),
// accumulated over all of K in registers from bias[j] (or 0), then epi(i, acc[i]) per row.
// Each row's sums run over k in one order whatever MR is: a row's bits never depend on the
// other rows of the batch.
template <int MR, int NR, typename Epi>
inline void gemm_tile(const XElem* x, int64_t xs, int64_t KP, const uint16_t* const* w,
                      const float* const* bias, const Prefetch& pf, const Epi& epi) {
  V acc[MR][NR];
  for (int j = 0; j < NR; ++j) {
    const V b0 = bias[j] ? load16(bias[j]) : vzero();
    for (int i = 0; i < MR; ++i) acc[i][j] = b0;
  }
  for (int64_t kp = 0; kp < KP; ++kp) {
    pf.at(kp);
#if defined(__AVX512BF16__)
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = (__m512bh)_mm512_loadu_si512(w[j] + kp * 32);
    for (int i = 0; i < MR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(
          *reinterpret_cast<const int32_t*>(x + i * xs + kp * 2));
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], a, wv[j]);
    }
#else
    V even[NR], odd[NR];
    for (int j = 0; j < NR; ++j) widen_pairs(w[j] + kp * 32, even[j], odd[j]);
    for (int i = 0; i < MR; ++i) {
      const float* xp = x + i * xs + kp * 2;
      const V a0 = vset1(xp[0]), a1 = vset1(xp[1]);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfmadd(a1, odd[j], vfmadd(a0, even[j], acc[i][j]));
    }
#endif
  }
  for (int i = 0; i < MR; ++i) epi(i, acc[i]);
}

// All M rows of x against one tile of NR blocks, in row tiles of 8, 4, 2 and 1; the
// prefetch of the next tile's `next_lines` lines (per run) is spread over all of them.
// epi(row, acc) stores a row's NR accumulators.
template <int NR, int MR = kRowTile, typename Epi>
inline void gemm_rows(const XElem* x, int64_t xs, int64_t M, int64_t KP,
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
                     [&](int i, const V* a) { epi(m0 + i, a); });
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
  const XElem* x;
  at::Tensor xw;  // x widened to float32 where XElem is float
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
  GemmArgs g{x.size(0), x.size(1), x.size(1) / 2, wp.size(0), x.stride(0), nullptr, {},
             reinterpret_cast<const uint16_t*>(wp.data_ptr<BFloat16>()), {}, nullptr};
#if defined(__AVX512BF16__)
  g.x = x.data_ptr<BFloat16>();
#else
  g.xw = x.to(at::kFloat).contiguous();
  g.x = g.xw.data_ptr<float>();
  g.xs = g.K;
#endif
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
  // one thread 6 tiles and the other 5 on N = 512) and runs them as tiles of kLinBlocks
  // blocks (AVX-512: 8 x 3 accumulators + 3 weight vectors fit the 32 registers), all of
  // x's rows per tile, so a tile's weights come from DRAM once, prefetched during the tile
  // before.
  at::parallel_for(0, g.NB, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nb0 = begin; nb0 < end; nb0 += kLinBlocks) {
      const int64_t nr = std::min<int64_t>(kLinBlocks, end - nb0);
      const uint16_t* w[3];
      const float* b[3];
      for (int64_t j = 0; j < nr; ++j) w[j] = g.block(nb0 + j), b[j] = g.bias_of(nb0 + j);
      Prefetch pf;  // the next tile's blocks follow this one's in memory
      pf.base[0] = reinterpret_cast<const char*>(g.block(nb0 + nr));
      pf.lines[0] = (std::min<int64_t>(end, nb0 + nr + kLinBlocks) - nb0 - nr) * g.KP;
      auto run = [&](auto blocks) {
        constexpr int NR = decltype(blocks)::value;
        gemm_rows<NR>(g.x, g.xs, g.M, g.KP, w, b, pf, [&](int64_t r, const V* a) {
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
  // AVX-512: tiles of two blocks of gate and the two matching ones of up (6 x 4
  // accumulators); the other variants: one of each.
  at::parallel_for(0, half, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; p += kSiluPairs) {
      const int64_t np = std::min<int64_t>(kSiluPairs, end - p);
      const uint16_t* w[4] = {g.block(p), g.block(p + 1), g.block(half + p), g.block(half + p + 1)};
      const float* b[4] = {g.bias_of(p), g.bias_of(p + 1), g.bias_of(half + p),
                           g.bias_of(half + p + 1)};
      Prefetch pf;  // the next tile's gate blocks, and its up blocks
      pf.base[0] = reinterpret_cast<const char*>(g.block(p + np));
      pf.base[1] = reinterpret_cast<const char*>(g.block(half + p + np));
      pf.lines[0] = pf.lines[1] = (std::min<int64_t>(end, p + np + kSiluPairs) - p - np) * g.KP;
      auto swiglu = [&](V gate_acc, V up_acc) {
        const V gate = rnd<BFloat16>(gate_acc);
        const V act = rnd<BFloat16>(vdiv(gate, vadd(vset1(1.f), vexp(vneg(gate)))));
        return vmul(act, rnd<BFloat16>(up_acc));
      };
      if (np == 2) {
        gemm_rows<4, 6>(g.x, g.xs, g.M, g.KP, w, b, pf, [&](int64_t r, const V* a) {
          store16(yp + r * I + p * 16, swiglu(a[0], a[2]));
          store16(yp + r * I + p * 16 + 16, swiglu(a[1], a[3]));
        });
      } else {
        const uint16_t* w2[2] = {w[0], w[2]};
        const float* b2[2] = {b[0], b[2]};
        gemm_rows<2>(g.x, g.xs, g.M, g.KP, w2, b2, pf, [&](int64_t r, const V* a) {
          store16(yp + r * I + p * 16, swiglu(a[0], a[1]));
        });
      }
    }
  });
  return y;
}


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
  return linear_bf16(x, w, bias);
}

at::Tensor gate_up_silu(const at::Tensor& x, const at::Tensor& w, bool onednn) {
  if (onednn) return silu_mul(onednn_linear(x, w, {}));
  return linear_bf16_silu(x, w, {});
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

// TORCH_LIBRARY pastes its namespace argument: the indirection expands KERNEL_NS first.
#define KNOB_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define KNOB_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

KNOB_LIBRARY(KERNEL_NS, m) {
  m.def("dense_decode_attention(Tensor q, Tensor k, Tensor v, Tensor kd, Tensor vd, "
        "Tensor lens, float scale, int splits=1) -> Tensor");
  m.def("rmsnorm(Tensor x, Tensor w, float eps) -> Tensor");
  m.def("add_rmsnorm_(Tensor(a!) x, Tensor residual, Tensor w, float eps) -> Tensor");
  m.def("rope_(Tensor(a!) qkv, Tensor cos, Tensor sin, int heads, int head_dim) -> ()");
  m.def("silu_mul(Tensor gu) -> Tensor");
  m.def("copy_rows_(Tensor(a!) dst, Tensor index, Tensor src) -> ()");
  m.def("argmax_rows(Tensor x) -> Tensor");
  m.def("pack_bf16_vnni(Tensor w) -> Tensor");
  m.def("linear_bf16(Tensor x, Tensor wp, Tensor? bias) -> Tensor");
  m.def("linear_bf16_silu(Tensor x, Tensor wp, Tensor? bias) -> Tensor");
  m.def("decode_layers(Tensor(a!) x, Tensor[] in_norm, Tensor[] qkv, Tensor?[] qkv_bias, "
        "Tensor[] o, Tensor[] post_norm, Tensor[] gate_up, Tensor[] down, Tensor[] k_blocks, "
        "Tensor[] v_blocks, Tensor lens, Tensor cos, Tensor sin, int heads, int kv_heads, "
        "float eps, float scale, int splits, bool onednn) -> (Tensor, Tensor)");
}

KNOB_LIBRARY_IMPL(KERNEL_NS, CPU, m) {
  m.impl("dense_decode_attention", &dense_decode_attention);
  m.impl("rmsnorm", &rmsnorm);
  m.impl("add_rmsnorm_", &add_rmsnorm_);
  m.impl("rope_", &rope_);
  m.impl("silu_mul", &silu_mul);
  m.impl("copy_rows_", &copy_rows_);
  m.impl("argmax_rows", &argmax_rows);
  m.impl("pack_bf16_vnni", &pack_bf16_vnni);
  m.impl("linear_bf16", &linear_bf16);
  m.impl("linear_bf16_silu", &linear_bf16_silu);
  m.impl("decode_layers", &decode_layers);
}

// oneDNN's prepacked float32 weights are MkldnnCPU tensors: the stack takes them too (it
// hands them only to mkldnn::_linear_pointwise).
KNOB_LIBRARY_IMPL(KERNEL_NS, MkldnnCPU, m) {
  m.impl("decode_layers", &decode_layers);
}
