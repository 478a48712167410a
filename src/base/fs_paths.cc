// Paths and folders: the folder of a path, joining, whether a file exists, checking a folder.
#include "mlc_manifest/fs.h"

#include <dirent.h>
#include <sys/stat.h>

#include "base/fs_internal.h"
#include "mlc_manifest/env.h"

namespace mlc {

std::string FolderOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool FileExists(const std::string& path) {
  return DefaultEnv()->Stat(path, /*follow_symlinks=*/false).exists;
}

Status CheckFolder(const std::string& dir) {
  if (HasControlChar(dir)) {
    return FileError(ErrorCode::kInvalid, EscapeControl(dir), "a folder name may not hold control characters");
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return IoError(dir, "cannot open the folder: " + ErrnoText());
  if (!S_ISDIR(st.st_mode)) return IoError(dir, "is not a folder; expected a package folder");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return IoError(dir, "cannot list the folder: " + ErrnoText());
  ::closedir(d);
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (!name.empty() && name.front() == '/') return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace mlc
