// Shard verification throughput: `mlc-manifest check --verify-shards` against coreutils
// `md5sum` over the same 1 GiB of shards (32 x 32 MiB, the converter's shard size), median of
// several interleaved runs each. Warm page cache (target: ours <= 0.55x md5sum's wall time, as
// two cores hash two shards at once), then cold (page cache dropped before every run through
// /proc/sys/vm/drop_caches when this process may write it, i.e. as root; the disk is then the
// limit and the figure is reported, not judged). Prints the load average beside the figures.
//   shards_bench [total_MiB=1024] [runs=3]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_main.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/json.h"

namespace {

double RunSeconds(const std::string& command) {
  auto t0 = std::chrono::steady_clock::now();
  int rc = std::system((command + " >/dev/null 2>&1").c_str());
  auto t1 = std::chrono::steady_clock::now();
  if (rc != 0) {
    std::fprintf(stderr, "command failed (%d): %s\n", rc, command.c_str());
    std::exit(1);
  }
  return std::chrono::duration<double>(t1 - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  int total_mib = argc > 1 ? std::atoi(argv[1]) : 1024;
  int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  const int shard_mib = 32;
  int shards = std::max(1, total_mib / shard_mib);
  std::string dir = (std::filesystem::temp_directory_path() / ("mlc-shards-bench-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> block(shard_mib << 17);  // 32 MiB of 8-byte words
  mlc::OrderedJson records = mlc::OrderedJson::array();
  std::string files;
  for (int s = 0; s < shards; ++s) {
    for (uint64_t& w : block) w = rng();
    std::string name = "params_shard_" + std::to_string(s) + ".bin";
    std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(block.data()),
                                                static_cast<std::streamsize>(block.size() * 8));
    uint64_t nbytes = block.size() * 8;
    auto md5 = mlc::Md5File(path);
    mlc::OrderedJson rec = {{"name", "w" + std::to_string(s)}, {"shape", {nbytes}}, {"dtype", "uint8"},
                            {"format", "raw"}, {"nbytes", nbytes}, {"byteOffset", 0}};
    records.push_back({{"dataPath", name}, {"format", "raw-shard"}, {"nbytes", nbytes},
                       {"records", mlc::OrderedJson::array({rec})}, {"md5sum", *md5}});
    files += " " + path;
  }
  std::ofstream(dir + "/tensor-cache.json") << mlc::OrderedJson{{"records", records}}.dump();
  std::ofstream(dir + "/mlc-chat-config.json") << "{}";
  double mb = static_cast<double>(shards) * shard_mib * 1048576 / 1e6;
  std::string ours = std::string(MLC_CLI_PATH) + " check " + dir + " --verify-shards";
  std::string peer = "md5sum" + files;
  RunSeconds(peer);  // warm the page cache
  std::vector<double> t_ours, t_peer;
  for (int i = 0; i < runs; ++i) {
    t_peer.push_back(RunSeconds(peer));
    t_ours.push_back(RunSeconds(ours));
  }
  double o = Median(t_ours), p = Median(t_peer);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("shard verification, %d x %d MiB (%.0f MB), median of %d, %u cores, load average %.2f\n",
              shards, shard_mib, mb, runs,
              std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN))), load[0]);
  std::printf("  warm page cache\n");
  std::printf("    md5sum                          %7.3f s  %7.0f MB/s\n", p, mb / p);
  std::printf("    mlc-manifest check --verify     %7.3f s  %7.0f MB/s\n", o, mb / o);
  const double ratio = o / p;
  std::printf("    ours / md5sum wall time = %.2f   target <= 0.55 (md5sum's one core vs our two)  %s\n",
              ratio, ratio <= 0.55 ? "PASS" : "FAIL (measure on an idle machine)");
  // Cold cache: every run starts from the disk.
  auto drop = [] {
    ::sync();
    std::FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
    if (!f) return false;
    const bool ok = std::fputs("3\n", f) >= 0;
    return std::fclose(f) == 0 && ok;
  };
  if (drop()) {
    std::vector<double> c_ours, c_peer;
    for (int i = 0; i < runs; ++i) {
      drop();
      c_peer.push_back(RunSeconds(peer));
      drop();
      c_ours.push_back(RunSeconds(ours));
    }
    const double co = Median(c_ours), cp = Median(c_peer);
    std::printf("  cold page cache (dropped before each run)\n");
    std::printf("    md5sum                          %7.3f s  %7.0f MB/s\n", cp, mb / cp);
    std::printf("    mlc-manifest check --verify     %7.3f s  %7.0f MB/s\n", co, mb / co);
    std::printf("    ours / md5sum wall time = %.2f   (limit: the disk's read rate; reported)\n", co / cp);
  } else {
    std::printf("  cold page cache: not measured (cannot write /proc/sys/vm/drop_caches; run as root)\n");
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::Guarded("shards_bench", [&] { return Main(argc, argv); });
}
