// An external C++ program using the header-only RAII wrappers of the C API: validates a package
// and its compiled program, binds them and prints the check report's verdicts.
//   bind PACKAGE_DIR PROGRAM_JSON
#include <mlc_manifest/mlc_manifest.h>

#include <iostream>

namespace {

int Report(const char* what, const std::vector<mlc::c::Error>& errors) {
  std::cerr << what << " failed\n";
  for (const auto& e : errors) {
    std::cerr << "  [" << e.code_name << "] " << e.document << " " << e.path << ": " << e.message << "\n";
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: bind PACKAGE_DIR PROGRAM_JSON\n";
    return 2;
  }
  mlc::c::Package package;
  mlc::c::Program program;
  mlc::c::Binding binding;
  if (mlc_package_read(package, argv[1]) != MLC_OK) return Report("package", package.errors());
  if (mlc_program_read(program, argv[2]) != MLC_OK) return Report("program", program.errors());
  if (mlc_bind(binding, package, program, nullptr) != MLC_OK) return Report("bind", binding.errors());
  std::cout << "bound " << mlc_binding_executor(binding) << " (" << mlc_binding_pair(binding) << ")\n";
  mlc::c::Report report;
  mlc_check_params params = mlc_check_params_default();
  params.program_path = argv[2];
  if (mlc_check(report, argv[1], &params) != MLC_OK) return Report("check", report.errors());
  for (size_t i = 0; i < mlc_report_count(report); ++i) {
    mlc_check_item item;
    mlc_report_item(report, i, &item);
    std::cout << item.verdict_name << " " << item.name << "\n";
  }
  return mlc_report_ok(report) ? 0 : 1;
}
