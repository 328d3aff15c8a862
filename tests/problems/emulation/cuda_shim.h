// A CPU stand-in for the few CUDA features cake_core/problems/kmeans_assign/reference.cu uses, so the
// reference's logic can be tested where no GPU is present (tests/problems/test_kmeans_reference_emulated.py).
//
// One std::thread per CUDA thread; blocks run one after another; __shared__ variables become function
// statics (shared by the block's threads); __syncthreads is a block-wide barrier; a shuffle goes through
// per-warp slots between two warp barriers. Warps that return early must not shuffle afterwards, as on a GPU.
#include <barrier>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};
thread_local Dim3 threadIdx, blockIdx;
static std::unique_ptr<std::barrier<>> g_block_barrier;
static std::vector<std::unique_ptr<std::barrier<>>> g_warp_barriers;
static std::vector<long long> g_slots;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static

static inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
static inline double __longlong_as_double(long long i) {
    double f;
    std::memcpy(&f, &i, 8);
    return f;
}
static inline void __syncthreads() { g_block_barrier->arrive_and_wait(); }

template <class T>
static inline T __shfl_xor_sync(unsigned, T v, int offset) {
    const int t = (int)threadIdx.x, w = t / 32, lane = t % 32;
    long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    g_slots[t] = bits;
    g_warp_barriers[w]->arrive_and_wait();
    const long long other = g_slots[w * 32 + (lane ^ offset)];
    g_warp_barriers[w]->arrive_and_wait();
    T r;
    std::memcpy(&r, &other, sizeof(T));
    return r;
}

// Run f() as every thread of a grid (grid.x, grid.y) of one-dimensional blocks of `threads` threads.
template <class F>
static void launch(Dim3 grid, int threads, F f) {
    g_slots.assign(threads, 0);
    g_warp_barriers.clear();
    for (int w = 0; w < threads / 32; ++w) g_warp_barriers.emplace_back(new std::barrier<>(32));
    for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            g_block_barrier.reset(new std::barrier<>(threads));
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t) {
                pool.emplace_back([=] {
                    blockIdx.x = bx;
                    blockIdx.y = by;
                    threadIdx.x = (unsigned)t;
                    f();
                });
            }
            for (auto& th : pool) th.join();
        }
    }
}
