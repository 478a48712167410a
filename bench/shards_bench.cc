// Shard verification throughput: `mlc-manifest check --verify-shards` against coreutils
// `md5sum` over the same 1 GiB of shards (32 x 32 MiB, the converter's shard size), warm page
// cache, median of several runs each, in the same process run. Prints MB/s and the ratio.
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

#include "mlc_manifest/check.h"
#include "mlc_manifest/json.h"

namespace {

double RunSeconds(const std::string& command) {
  auto t0 = std::chrono::steady_clock::now();
  int rc = std::system((command + " >/dev/null").c_str());
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

}  // namespace

int main(int argc, char** argv) {
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
  std::printf("shard verification, %d x %d MiB (%.0f MB), warm cache, median of %d, %u cores\n", shards,
              shard_mib, mb, runs, std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN))));
  std::printf("  md5sum                          %7.3f s  %7.0f MB/s\n", p, mb / p);
  std::printf("  mlc-manifest check --verify     %7.3f s  %7.0f MB/s\n", o, mb / o);
  std::printf("  ratio (ours / md5sum throughput) %.2fx (target >= 1.5x)\n", p / o);
  std::filesystem::remove_all(dir);
  return 0;
}
