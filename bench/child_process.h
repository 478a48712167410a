// Runs a program for a bench: argv (looked up on PATH) with its stdout in a file, stderr passed
// through; its exit status, wall time, peak resident memory (from wait4) and what it printed.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace bench {

struct ChildResult {
  int exit_code = -1;  // -1: it did not start or did not exit normally
  long peak_rss_kb = 0;
  double wall_ms = 0;
  std::string out;
};

inline ChildResult RunChild(const std::vector<std::string>& argv, const std::string& out_file) {
  ChildResult r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return r;
  }
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) == pid && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.peak_rss_kb = usage.ru_maxrss;
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  return r;
}

}  // namespace bench
