// The bfloat16 GEMM for decode-sized batches, on a VNNI-packed weight.
// Part of the fused CPU kernels: the vector layer and the ops' declarations are in
// kernels.h, the overview, the decoder stack and the ops' registration in cpu_ops.cpp.

#include "kernels.h"

namespace KERNEL_NS {
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



}  // namespace KERNEL_NS
