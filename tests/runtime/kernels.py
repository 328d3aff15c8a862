"""Header-free CUDA sources shared by the runtime tests (NVRTC from PyPI has no CUDA headers).

Loaded through the ``kernels`` fixture of conftest.py.
"""

from __future__ import annotations

VADD = r"""
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

# A 64-float register array with a loop-carried dependence on every element: with -maxrregcount=32
# ptxas must spill.
SPILL = r"""
extern "C" __global__ void spill(float* out, const float* in, int n) {
  float acc[64];
  #pragma unroll
  for (int j = 0; j < 64; j++) acc[j] = in[j * n + threadIdx.x];
  for (int k = 0; k < n; k++) {
    #pragma unroll
    for (int j = 0; j < 64; j++) acc[j] = acc[j] * acc[(j + k) & 63] + 1.0f;
  }
  #pragma unroll
  for (int j = 0; j < 64; j++) out[j * n + threadIdx.x] = acc[j];
}
"""

# A local array indexed by loaded values cannot live in registers: a 400-byte stack frame.
STACK = r"""
extern "C" __global__ void stack(float* out, const int* idx) {
  float a[100];
  for (int j = 0; j < 100; j++) a[j] = out[j];
  for (int j = 0; j < 100; j++) a[idx[j]] += a[idx[j + 100]];
  out[threadIdx.x] = a[idx[threadIdx.x]];
}
"""

SHARED = r"""
extern "C" __global__ void shared_rev(const float* in, float* out) {
  __shared__ float s[256];
  s[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x];
}
"""

# setmaxnreg without a register cap at entry: ptxas ignores it (a finding).
SETMAXNREG_UNCAPPED = r"""
extern "C" __global__ void ws_uncapped(float* c) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  c[threadIdx.x] = 1.0f;
}
"""

# The same with __launch_bounds__(threads, 1): ptxas honours it.
SETMAXNREG_CAPPED = r"""
extern "C" __global__ void __launch_bounds__(128, 1) ws_capped(float* c) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  c[threadIdx.x] = 1.0f;
}
"""

# One m16n8k16 bf16 mma.sync (Ampere and later) and an FFMA in the epilogue.
MMA_SYNC = r"""
extern "C" __global__ void mma16816(const unsigned* a, const unsigned* b, float* d, float alpha) {
  unsigned a0 = a[threadIdx.x * 4 + 0], a1 = a[threadIdx.x * 4 + 1];
  unsigned a2 = a[threadIdx.x * 4 + 2], a3 = a[threadIdx.x * 4 + 3];
  unsigned b0 = b[threadIdx.x * 2 + 0], b1 = b[threadIdx.x * 2 + 1];
  float c0 = 0.f, c1 = 0.f, c2 = 0.f, c3 = 0.f;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  d[threadIdx.x * 4 + 0] = c0 * alpha + 1.0f;
  d[threadIdx.x * 4 + 1] = c1;
  d[threadIdx.x * 4 + 2] = c2;
  d[threadIdx.x * 4 + 3] = c3;
}
"""

# One wgmma (Hopper sm_90a only): fence, mma_async m64n8k16 from shared-memory descriptors, commit, wait.
WGMMA = r"""
extern "C" __global__ void __launch_bounds__(128, 1) wgmma_tile(float* out, unsigned long long desc_a,
                                                                unsigned long long desc_b) {
  __shared__ alignas(1024) unsigned short tile[64 * 16 + 8 * 16];
  tile[threadIdx.x] = (unsigned short)threadIdx.x;
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  unsigned long long base = (unsigned long long)(unsigned)__cvta_generic_to_shared(tile);
  unsigned long long da = desc_a | ((base >> 4) & 0x3FFF);
  unsigned long long db = desc_b | (((base + 2048) >> 4) & 0x3FFF);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
               : "l"(da), "l"(db), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  out[threadIdx.x * 4 + 0] = d0;
  out[threadIdx.x * 4 + 1] = d1;
  out[threadIdx.x * 4 + 2] = d2;
  out[threadIdx.x * 4 + 3] = d3;
}
"""

# TMA (sm_90a): each CTA loads one BOX_H x BOX_W box of a 2-D bf16 tensor into shared memory with
# cp.async.bulk.tensor completing on an mbarrier (expect-tx = full box bytes, even for a box that is
# partly out of bounds: those elements are zero-filled), then writes the box out row-major.
# CTA 0 loads the box at (x0, y0), CTA 1 the box at (x1, y1); coordinates are innermost first. The
# tile is 1024-byte aligned so that a 128B-swizzled box lands in whole swizzle atoms. The box size is
# set with -DBOX_W=.. -DBOX_H=.. (default 32 x 16).
TMA = r"""
struct alignas(64) TensorMap { unsigned long long opaque[16]; };
#ifndef BOX_W
#define BOX_W 32
#endif
#ifndef BOX_H
#define BOX_H 16
#endif
extern "C" __global__ void tma_box(const __grid_constant__ TensorMap tmap, unsigned short* out,
                                   int x0, int y0, int x1, int y1) {
  __shared__ alignas(1024) unsigned short tile[BOX_H * BOX_W];
  __shared__ alignas(8) unsigned long long bar;
  const unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
  const unsigned tile_addr = (unsigned)__cvta_generic_to_shared(tile);
  const int cx = blockIdx.x == 0 ? x0 : x1;
  const int cy = blockIdx.x == 0 ? y0 : y1;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(bar_addr) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(bar_addr), "r"(BOX_H * BOX_W * 2) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(tile_addr), "l"((unsigned long long)&tmap), "r"(cx), "r"(cy), "r"(bar_addr)
                 : "memory");
  }
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar_addr), "r"(0) : "memory");
  }
  unsigned short* dst = out + blockIdx.x * (BOX_H * BOX_W);
  for (int i = threadIdx.x; i < BOX_H * BOX_W; i += blockDim.x) dst[i] = tile[i];
}
"""

# ------------------------------------------------------------------------------- GPU-test kernels

PARTIAL = r"""
extern "C" __global__ void partial(float* y, int* z, unsigned short* h, int* e, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) {
    y[i] = (float)i;
    z[i] = i;
    h[i] = (unsigned short)(i & 0x7FFF);
    e[i] = -i;
  }
}
"""

TWO_STEP = r"""
extern "C" __global__ void scale2(const float* a, float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) s[i] = a[i] * 2.0f;
}
extern "C" __global__ void plus1(const float* s, float* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = s[i] + 1.0f;
}
"""

SCALARS = r"""
extern "C" __global__ void scalars(long long a, unsigned b, float c, double d,
                                   long long* oa, unsigned* ob, float* oc, double* od) {
  if (blockIdx.x == 0 && threadIdx.x == 0) { oa[0] = a; ob[0] = b; oc[0] = c; od[0] = d; }
}
"""

WIDEN_BF16 = r"""
extern "C" __global__ void widen(const unsigned short* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __uint_as_float(((unsigned)x[i]) << 16);
}
"""

# Dynamic shared memory (above 48 KiB when per_block is large): each block reverses its slice.
SMEM_REVERSE = r"""
extern "C" __global__ void smem_reverse(const float* in, float* out, int per_block) {
  extern __shared__ float buf[];
  const float* src = in + (size_t)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) buf[i] = src[i];
  __syncthreads();
  float* dst = out + (size_t)blockIdx.x * per_block;
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) dst[i] = buf[per_block - 1 - i];
}
"""

BOUNDED = r"""
extern "C" __global__ void __launch_bounds__(128) bounded(float* y) { y[threadIdx.x] = 1.0f; }
"""

# Writes through a wild pointer: an illegal address, a sticky error.
WILD_WRITE = r"""
extern "C" __global__ void wild_write(float* out, long long offset) {
  float* p = (float*)((char*)out + offset);
  *p = 1.0f;
}
"""

# Spins until a flag that nothing sets becomes nonzero: never finishes.
SPIN = r"""
extern "C" __global__ void spin(const volatile int* flag, int* out) {
  while (flag[0] == 0) { }
  out[0] = 1;
}
"""
