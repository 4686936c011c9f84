// The shared layer of the fused CPU kernels (engine/model/kernels/*.cpp): the 16-lane
// vector V of each compiled variant and its operations, bf16 <-> float32, and the ops that
// one kernel family calls of another, declared in the variant's own namespace (KERNEL_NS:
// several variants live in one process, each its own shared library).  What the kernels
// are and how they are built: cpu_ops.cpp and engine/model/kernels/__init__.py.
#pragma once

// Only the headers the kernels use: <ATen/ATen.h> declares every ATen op, and compiling
// it took ~4 s more of each variant's ~21 s build (measured, g++ -O3, torch 2.13).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
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


// A CPU tensor of dtype dt, else an error naming the op.
inline void check_float(const at::Tensor& t, at::ScalarType dt, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == dt, what, ": expected a CPU tensor of ",
              dt, ", got ", t.scalar_type(), " on ", t.device());
}

}  // namespace

namespace KERNEL_NS {

// attention.cpp
at::Tensor dense_decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& kd, const at::Tensor& vd,
                                  const at::Tensor& lens, double scale, int64_t splits);
// norm_rope.cpp
at::Tensor rmsnorm_common(at::Tensor& x, const at::Tensor* residual, const at::Tensor& w,
                          double eps);
at::Tensor rmsnorm(const at::Tensor& x, const at::Tensor& w, double eps);
at::Tensor add_rmsnorm_(at::Tensor x, const at::Tensor& residual, const at::Tensor& w, double eps);
void rope_(at::Tensor qkv, const at::Tensor& cos, const at::Tensor& sin, int64_t heads,
           int64_t head_dim);
// elementwise.cpp
at::Tensor silu_mul(const at::Tensor& gu);
void copy_rows_(at::Tensor dst, const at::Tensor& index, const at::Tensor& src);
at::Tensor argmax_rows(const at::Tensor& x);
// gemm.cpp
at::Tensor pack_bf16_vnni(const at::Tensor& w);
at::Tensor linear_bf16(const at::Tensor& x, const at::Tensor& wp,
                       const c10::optional<at::Tensor>& bias);
at::Tensor linear_bf16_silu(const at::Tensor& x, const at::Tensor& wp,
                            const c10::optional<at::Tensor>& bias);

}  // namespace KERNEL_NS
