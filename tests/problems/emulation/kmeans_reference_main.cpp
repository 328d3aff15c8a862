// Runs the kmeans-assign CUDA reference's three kernels on the CPU through cuda_shim.h, with the grids
// the test takes from cuda_reference.build_plan.
// Usage: kmeans_reference_main B N K D IS_F16 DIR SQNORM_GRID_X ARGMIN_GRID_X ARGMIN_GRID_Y VERDICT_GRID_X
// (every block has 256 threads). Reads DIR/{x,c,cand}.bin (raw 16-bit inputs, int32 candidate), writes DIR/{ref_idx,rel_gap,code}.bin.
// Also: kmeans_reference_main decode DIR writes DIR/decode.bin, decode16 of all 65536 patterns, f16 then bf16.
#include "cuda_shim.h"
#include REFERENCE_CU
#include <cstdio>
#include <cstdlib>
#include <string>

template <class T>
static std::vector<T> read_file(const std::string& path, size_t n) {
    std::vector<T> v(n);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f || std::fread(v.data(), sizeof(T), n, f) != n) std::exit(3);
    std::fclose(f);
    return v;
}

template <class T>
static void write_file(const std::string& path, const std::vector<T>& v) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(v.data(), sizeof(T), v.size(), f) != v.size()) std::exit(4);
    std::fclose(f);
}

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "decode") {
        std::vector<double> out(2 * 65536);
        for (int i = 0; i < 65536; ++i) {
            out[i] = decode16((u16)i, 1);
            out[65536 + i] = decode16((u16)i, 0);
        }
        write_file(std::string(argv[2]) + "/decode.bin", out);
        return 0;
    }
    if (argc != 11) return 2;
    const int B = std::atoi(argv[1]), N = std::atoi(argv[2]), K = std::atoi(argv[3]), D = std::atoi(argv[4]);
    const int is_f16 = std::atoi(argv[5]);
    const std::string dir = argv[6];
    const unsigned g_sqnorm = std::atoi(argv[7]), g_argmin_x = std::atoi(argv[8]), g_argmin_y = std::atoi(argv[9]);
    const unsigned g_verdict = std::atoi(argv[10]);
    const auto x = read_file<u16>(dir + "/x.bin", (size_t)B * N * D);
    const auto c = read_file<u16>(dir + "/c.bin", (size_t)B * K * D);
    const auto cand = read_file<int>(dir + "/cand.bin", (size_t)B * N);
    const long long rows = (long long)B * K, points = (long long)B * N;
    std::vector<double> cc(rows, -7.0), rel_gap(points, -7.0);  // poisoned like a plan's buffers
    std::vector<int> ref_idx(points, -1), code(points, -1);
    launch({g_sqnorm, 1, 1}, 256, [&] { cake_ref_sqnorm(c.data(), cc.data(), rows, D, is_f16); });
    launch({g_argmin_x, g_argmin_y, 1}, 256,
           [&] { cake_ref_argmin(x.data(), c.data(), cc.data(), ref_idx.data(), N, K, D, is_f16); });
    launch({g_verdict, 1, 1}, 256, [&] {
        cake_ref_verdict(x.data(), c.data(), cand.data(), ref_idx.data(), rel_gap.data(), code.data(), points, N,
                         K, D, is_f16);
    });
    write_file(dir + "/ref_idx.bin", ref_idx);
    write_file(dir + "/rel_gap.bin", rel_gap);
    write_file(dir + "/code.bin", code);
    return 0;
}
