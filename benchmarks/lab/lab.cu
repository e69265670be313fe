// kernel_lab: bit-for-bit checks and CUDA-Graph timing of kernel source trees, without torch
// (benchmarks/lab/README.md). Build with benchmarks/lab/build.sh; run ./lab [--rounds R] [--only S].
#include <algorithm>
#include <cstring>
#include <map>

#include "lab.h"

namespace {

// Qwen-MoE default shape (workbench/data/shapes.py, qwen3.8-flash-next at tp 4).
constexpr int kTopK = 10, kExperts = 64, kBanks = 48, kCalls = 48, kRotGraphs = 2;
struct OpShape {
  int K, N;
};
const std::map<std::string, OpShape> kShapes = {{"w13", {2560, 320}}, {"w2", {160, 2560}}};

__device__ __forceinline__ unsigned mix(unsigned long long i, unsigned seed) {
  unsigned long long z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<unsigned>(z ^ (z >> 31));
}

__global__ void fill_words(unsigned* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = mix(i, seed);
}

// b3 records {scale lo, scale hi, zero} with scales in [2^-9, 2^-7) and zeros 0..15; the b4 twin
// {scale, fp16(fp16(-zero) * scale)} decodes to the same weights (docs/DESIGN.md §3).
__global__ void fill_meta(unsigned char* b3, unsigned* b4, size_t records, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < records; i += size_t(gridDim.x) * blockDim.x) {
    const unsigned h = mix(i, seed);
    const unsigned short sb = static_cast<unsigned short>((0x1800u + ((h >> 10) & 1u) * 0x400u) | (h & 0x3ffu));
    const unsigned zero = (h >> 12) & 15u;
    b3[3 * i] = sb & 0xff;
    b3[3 * i + 1] = sb >> 8;
    b3[3 * i + 2] = static_cast<unsigned char>(zero);
    const __half b = __hmul(__int2half_rn(-static_cast<int>(zero)), __ushort_as_half(sb));
    b4[i] = sb | (static_cast<unsigned>(__half_as_ushort(b)) << 16);
  }
}

__global__ void fill_halves(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2half((mix(i, seed) & 0xffff) / 32768.f - 1.f);
}

struct Bank {  // one op's banks: kBanks layers of kExperts experts
  OpShape s;
  uint4* weights;
  unsigned char* b3;
  unsigned* b4;
  size_t w16_per_bank, records_per_bank;
  const uint4* w(int bank) const { return weights + bank * w16_per_bank; }
  const unsigned char* meta(const std::string& layout, int bank) const {
    return layout == "b3" ? b3 + bank * records_per_bank * 3
                          : reinterpret_cast<const unsigned char*>(b4 + bank * records_per_bank);
  }
};

Bank make_bank(OpShape s, unsigned seed) {
  Bank b{s};
  const size_t G = s.K / 32;
  b.w16_per_bank = size_t(kExperts) * G * s.N;
  b.records_per_bank = size_t(kExperts) * G * s.N;
  CUDA_CHECK(cudaMalloc(&b.weights, b.w16_per_bank * kBanks * 16));
  CUDA_CHECK(cudaMalloc(&b.b3, b.records_per_bank * kBanks * 3 + 16));
  CUDA_CHECK(cudaMalloc(&b.b4, b.records_per_bank * kBanks * 4));
  fill_words<<<1024, 256>>>(reinterpret_cast<unsigned*>(b.weights), b.w16_per_bank * kBanks * 4, seed);
  fill_meta<<<1024, 256>>>(b.b3, b.b4, b.records_per_bank * kBanks, seed + 1);
  CUDA_CHECK(cudaGetLastError());
  return b;
}

// Distinct routed ids per set; set 0 is the hot set, 1 + r * kCalls + c call c of rotating graph r.
std::vector<int> make_ids(int sets) {
  std::vector<int> ids;
  unsigned s = 2024u;
  for (int k = 0; k < sets; ++k) {
    std::vector<int> picked;
    while (static_cast<int>(picked.size()) < kTopK) {
      s = s * 1664525u + 1013904223u;
      const int e = static_cast<int>((s >> 8) % kExperts);
      if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
    }
    ids.insert(ids.end(), picked.begin(), picked.end());
  }
  return ids;
}

struct Ctx {
  std::map<std::string, Bank> banks;
  int* ids;  // [sets][kTopK]
  int* bad_ids;  // one set with out-of-range ids (policy: they contribute nothing)
  __half *x13, *x2, *out;
  float* rw;
  unsigned long long* slots;
};

lab::Args args_for(const Ctx& c, const lab::Kernel& k, int bank, const int* ids) {
  const Bank& b = c.banks.at(k.op);
  lab::Args a{};
  a.x = k.op == "w13" ? c.x13 : c.x2;
  a.weights = b.w(bank);
  a.meta = b.meta(k.layout, bank);
  a.ids = ids;
  a.rw = c.rw;
  a.out = c.out;
  a.slots = c.slots;
  a.K = b.s.K;
  a.N = b.s.N;
  a.experts = kExperts;
  a.top_k = kTopK;
  return a;
}

size_t out_halves(const lab::Kernel& k) {
  const OpShape s = kShapes.at(k.op);
  return k.op == "w13" ? size_t(kTopK) * s.N / 2 : size_t(s.N);
}

// The kernel's outputs on three cases (hot ids, another bank and ids, out-of-range ids), poisoned first.
std::vector<unsigned short> outputs(const Ctx& c, const lab::Kernel& k, cudaStream_t st) {
  std::vector<unsigned short> all;
  const int* cases[3] = {c.ids, c.ids + 5 * kTopK, c.bad_ids};
  const int banks[3] = {0, 7, 3};
  for (int i = 0; i < 3; ++i) {
    const size_t n = out_halves(k);
    CUDA_CHECK(cudaMemsetAsync(c.out, 0xff, n * 2, st));
    k.launch(args_for(c, k, banks[i], cases[i]), st);
    std::vector<unsigned short> h(n);
    CUDA_CHECK(cudaMemcpyAsync(h.data(), c.out, n * 2, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    all.insert(all.end(), h.begin(), h.end());
  }
  return all;
}

float half_to_float(unsigned short b) {
  const unsigned s = (b >> 15) & 1, e = (b >> 10) & 31, m = b & 1023;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(static_cast<float>(m | 1024), int(e) - 25);
  if (e == 31) v = m ? NAN : INFINITY;
  return s ? -v : v;
}

std::string compare(const std::vector<unsigned short>& a, const std::vector<unsigned short>& b) {
  size_t diff = 0, nan = 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float fa = half_to_float(a[i]), fb = half_to_float(b[i]);
    if (std::isnan(fa) || std::isnan(fb)) ++nan;
    if (a[i] != b[i]) ++diff;
    if (!std::isnan(fa) && !std::isnan(fb)) {
      num += (double(fa) - fb) * (double(fa) - fb);
      den += double(fb) * fb;
    }
  }
  char buf[160];
  if (diff == 0 && nan == 0) return "identical";
  std::snprintf(buf, sizeof buf, "%zu/%zu differ, %zu NaN, rel-L2 %.2e", diff, a.size(), nan,
                den > 0 ? std::sqrt(num / den) : 0.0);
  return buf;
}

struct Graphs {
  cudaGraphExec_t hot;
  std::vector<cudaGraphExec_t> rot;
};

cudaGraphExec_t capture(const Ctx& c, const lab::Kernel& k, cudaStream_t st, bool hot, int r) {
  CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int call = 0; call < kCalls; ++call) {
    const int* ids = c.ids + (hot ? 0 : (1 + r * kCalls + call)) * kTopK;
    k.launch(args_for(c, k, hot ? 0 : call % kBanks, ids), st);
  }
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamEndCapture(st, &g));
  cudaGraphExec_t e;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  CUDA_CHECK(cudaGraphDestroy(g));
  return e;
}

double time_us(const std::vector<cudaGraphExec_t>& gs, int replays, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1) {
  CUDA_CHECK(cudaEventRecord(e0, st));
  for (int i = 0; i < replays; ++i) CUDA_CHECK(cudaGraphLaunch(gs[i % gs.size()], st));
  CUDA_CHECK(cudaEventRecord(e1, st));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  return ms * 1000.0 / (replays * kCalls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15, replays = 20;
  std::string only;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a != "--rounds" && a != "--replays" && a != "--only") {
      std::fprintf(stderr, "unknown option %s (known: --rounds N, --replays N, --only SUBSTRING)\n", a.c_str());
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "option %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (a == "--only") {
      only = v;
      continue;
    }
    const int n = std::atoi(v.c_str());
    if (n < 1 || n > 100000 || v.find_first_not_of("0123456789") != std::string::npos) {
      std::fprintf(stderr, "option %s needs a positive integer, got '%s'\n", a.c_str(), v.c_str());
      return 2;
    }
    (a == "--rounds" ? rounds : replays) = n;
  }
  std::vector<lab::Kernel> ks;
  for (const auto& k : lab::registry())
    if (only.empty() || k.name().find(only) != std::string::npos || k.tree == "ref") ks.push_back(k);
  std::sort(ks.begin(), ks.end(), [](const lab::Kernel& a, const lab::Kernel& b) { return a.name() < b.name(); });
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; 48-call graphs, %d rounds x %d replays, us per call (median over rounds)\n", prop.name,
              prop.multiProcessorCount, rounds, replays);

  Ctx c;
  c.banks.emplace("w13", make_bank(kShapes.at("w13"), 11));
  c.banks.emplace("w2", make_bank(kShapes.at("w2"), 22));
  const int sets = 1 + kRotGraphs * kCalls;
  const std::vector<int> ids = make_ids(sets);
  CUDA_CHECK(cudaMalloc(&c.ids, ids.size() * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(c.ids, ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice));
  std::vector<int> bad(ids.begin() + 3 * kTopK, ids.begin() + 4 * kTopK);
  bad[2] = -1;
  bad[7] = kExperts + 5;
  CUDA_CHECK(cudaMalloc(&c.bad_ids, kTopK * sizeof(int)));
  CUDA_CHECK(cudaMemcpy(c.bad_ids, bad.data(), kTopK * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMalloc(&c.x13, 2560 * 2));
  CUDA_CHECK(cudaMalloc(&c.x2, kTopK * 160 * 2));
  fill_halves<<<16, 256>>>(c.x13, 2560, 5);
  fill_halves<<<16, 256>>>(c.x2, kTopK * 160, 6);
  CUDA_CHECK(cudaMalloc(&c.rw, kTopK * sizeof(float)));
  const std::vector<float> rw = {0.31f, 0.17f, 0.12f, 0.09f, 0.08f, 0.07f, 0.06f, 0.05f, 0.03f, 0.02f};
  CUDA_CHECK(cudaMemcpy(c.rw, rw.data(), kTopK * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMalloc(&c.out, 65536 * 2));
  CUDA_CHECK(cudaMalloc(&c.slots, 65536 * 8));
  CUDA_CHECK(cudaMemset(c.slots, 0, 65536 * 8));
  CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  // Outputs: each kernel against the ref tree's same variant, and against its own tree's b4-scalar.
  std::map<std::string, std::vector<unsigned short>> outs;
  for (const auto& k : ks) outs[k.name()] = outputs(c, k, st);
  std::printf("\n%-34s %5s  %-44s %s\n", "kernel", "regs", "vs ref (same variant)", "vs own b4-scalar");
  for (const auto& k : ks) {
    cudaFuncAttributes fa{};
    CUDA_CHECK(cudaFuncGetAttributes(&fa, k.func));
    const std::string ref = "ref:" + k.op + ":" + k.layout + "-" + k.reader;
    const std::string own = k.tree + ":" + k.op + ":b4-scalar";
    std::printf("%-34s %5d  %-44s %s\n", k.name().c_str(), fa.numRegs,
                outs.count(ref) ? compare(outs[k.name()], outs[ref]).c_str() : "-",
                outs.count(own) ? compare(outs[k.name()], outs[own]).c_str() : "-");
  }
  std::fflush(stdout);

  std::vector<Graphs> gs;
  for (const auto& k : ks) {
    Graphs g{capture(c, k, st, true, 0), {}};
    for (int r = 0; r < kRotGraphs; ++r) g.rot.push_back(capture(c, k, st, false, r));
    gs.push_back(g);
  }
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (size_t i = 0; i < ks.size(); ++i) {  // warm-up
    time_us({gs[i].hot}, 3, st, e0, e1);
    time_us(gs[i].rot, 3, st, e0, e1);
  }
  std::vector<std::vector<double>> hot(ks.size()), rot(ks.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t n = 0; n < ks.size(); ++n) {  // round-robin, the start rotating by round
      const size_t i = (n + r) % ks.size();
      hot[i].push_back(time_us({gs[i].hot}, replays, st, e0, e1));
      rot[i].push_back(time_us(gs[i].rot, replays, st, e0, e1));
    }
  std::printf("\n%-34s %8s %8s %9s %9s\n", "kernel", "hot", "rotating", "hot/ref", "rot/ref");
  for (size_t i = 0; i < ks.size(); ++i) {
    const double h = median(hot[i]), ro = median(rot[i]);
    double hr = 0, rr = 0;
    for (size_t j = 0; j < ks.size(); ++j)
      if (ks[j].tree == "ref" && ks[j].op == ks[i].op && ks[j].layout == ks[i].layout && ks[j].reader == ks[i].reader) {
        hr = h / median(hot[j]);
        rr = ro / median(rot[j]);
      }
    std::printf("%-34s %8.3f %8.3f %9.4f %9.4f\n", ks[i].name().c_str(), h, ro, hr, rr);
  }
  return 0;
}
