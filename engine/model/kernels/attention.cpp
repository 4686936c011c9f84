// Decode attention over a dense context block plus the step's own token.
// Part of the fused CPU kernels: the vector layer and the ops' declarations are in
// kernels.h, the overview, the decoder stack and the ops' registration in cpu_ops.cpp.

#include "kernels.h"

namespace KERNEL_NS {
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

}  // namespace KERNEL_NS
