"""Device-side definitions every generated file starts with. Header-free: NVRTC from PyPI ships no
CUDA headers, and exported sources should build with a bare ``nvcc``."""

PRELUDE = r"""
// element storage: 16-bit floats are kept as raw bits and converted with PTX
typedef unsigned short cake_bf16;
typedef unsigned short cake_f16;

__host__ __device__ __forceinline__ int cake_cdiv(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ __forceinline__ int cake_min(int a, int b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int cake_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ float cake_to_f32(cake_bf16 v, int is_f16) {
  if (is_f16) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f; }
  return __int_as_float(((unsigned)v) << 16);
}
__device__ __forceinline__ float cake_to_f32(float v, int) { return v; }
__device__ __forceinline__ float cake_to_f32(int v, int) { return (float)v; }
__device__ __forceinline__ cake_bf16 cake_from_f32(float f, int is_f16) {
  unsigned short h;
  if (is_f16) asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  else asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ unsigned cake_smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
// a swizzled shared address: the 16-byte chunk bits (4..) XOR the address bits from 7 up, `mask` wide
__device__ __forceinline__ unsigned cake_swizzled(unsigned a, unsigned mask) { return a ^ (((a >> 7) & mask) << 4); }
"""

#: a cluster barrier: every thread of every CTA of the cluster arrives (releasing its writes), then waits
#: (acquiring the peers'); the lowering adds one after barrier init and one at exit of a clustered kernel
CLUSTER_SYNC = (
    'asm volatile("barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");'
)
