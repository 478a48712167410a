// The serve child process and the raw-socket client of the tests (serve_process.h).
#include "support/serve_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <regex>
#include <thread>

namespace mlc::test {

ServerProcess::ServerProcess(const std::string& dir, std::vector<std::string> extra)
    : ServerProcess(std::vector<std::string>{dir}, std::move(extra)) {}

ServerProcess::ServerProcess(const std::vector<std::string>& dirs, std::vector<std::string> extra) {
  log_ = log_dir_.File("serve.log");
  std::vector<std::string> args = {MLC_CLI_PATH, "serve"};
  args.insert(args.end(), dirs.begin(), dirs.end());
  args.insert(args.end(), {"--port", "0"});
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = fork();
  if (pid_ == 0) {
    int fd = ::open(log_.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::regex re(":([0-9]+)\\n");
  for (int i = 0; i < 600 && port_ == 0; ++i) {
    std::smatch m;
    std::string text = ReadText(log_);
    if (std::regex_search(text, m, re)) port_ = std::stoi(m[1]);
    if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !stopped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int ServerProcess::Stop() {
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  stopped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int64_t ServerProcess::StatusKb(const std::string& field) const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size()));
  }
  return -1;
}

int Connect(int port, int recv_timeout_s) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{recv_timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

HttpReply ParseReply(const std::string& raw) {
  HttpReply r;
  if (raw.rfind("HTTP/1.1 ", 0) == 0) r.status = std::stoi(raw.substr(9, 3));
  size_t end = raw.find("\r\n\r\n");
  if (end != std::string::npos) {
    r.head = raw.substr(0, end + 2);
    r.body = raw.substr(end + 4);
  }
  return r;
}

HttpReply Http(int port, const std::string& method, const std::string& path, const std::string& body,
               const std::string& headers) {
  int fd = Connect(port);
  if (fd < 0) return {};
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers;
  if (method == "POST") {
    if (headers.find("Content-Type:") == std::string::npos) req += "Content-Type: application/json\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  SendAll(fd, req);
  HttpReply r = ParseReply(ReadAll(fd));
  close(fd);
  return r;
}

Json BodyJson(const HttpReply& r) {
  auto j = ParseJson(r.body);
  return j.ok() ? *j : Json();
}

std::string ErrorMessage(const HttpReply& r) {
  Json j = BodyJson(r);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object() ||
      !j["error"]["message"].is_string()) {
    return "";
  }
  return j["error"]["message"].get<std::string>();
}

Json ScrapeMetrics(int port) {
  HttpReply r = Http(port, "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  auto parsed = RunProgram({"/usr/bin/python3", SourcePath("tests/support/parse_metrics.py")}, r.body);
  EXPECT_EQ(parsed.exit_code, 0) << parsed.err << r.body;
  auto j = ParseJson(parsed.out);
  return j.ok() ? *j : Json();
}

double Sample(const Json& families, const std::string& family, const std::string& name,
              const std::string& label, const std::string& value) {
  if (!families.contains(family)) return std::nan("");
  for (const Json& s : families[family]["samples"]) {
    if (s["name"] != name) continue;
    if (!label.empty() && (!s["labels"].contains(label) || s["labels"][label] != value)) continue;
    return s["value"].get<double>();
  }
  return std::nan("");
}

}  // namespace mlc::test
