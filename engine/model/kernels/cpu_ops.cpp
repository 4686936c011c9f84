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
//
// The kernels by family: attention.cpp (dense decode attention), norm_rope.cpp (RMSNorm,
// RoPE), elementwise.cpp (SwiGLU, the K/V row scatter, argmax), gemm.cpp (the bf16 GEMM),
// this file (oneDNN's GEMM, the one-call decoder stack, the registration); the vector layer
// of each variant and the ops' declarations in kernels.h.  One build compiles them all.

#include "kernels.h"

namespace KERNEL_NS {

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

}  // namespace KERNEL_NS

using namespace KERNEL_NS;

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
