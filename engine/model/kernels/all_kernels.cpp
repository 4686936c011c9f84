// The one translation unit the build compiles (a unity build): every kernel family's source,
// included in turn.  torch's headers (kernels.h: ATen, the dispatcher, torch/library.h) cost
// more to compile than all the kernels together, so five units would pay for them five
// times in every variant (about +20% of a variant's compile time, measured); the families
// stay separate files to read and edit.  The order is free: kernels.h declares every op a
// family calls of another, and cpu_ops.cpp registers them all.
#include "attention.cpp"
#include "norm_rope.cpp"
#include "elementwise.cpp"
#include "gemm.cpp"
#include "cpu_ops.cpp"
