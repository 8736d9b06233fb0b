// The external-data sandbox: fx::onnx::folder_reader reads tensors stored next to a model only
// from regular files whose real path (symlinks resolved) lies inside the model's folder, and
// only the byte range the file really has.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fx/error.h"
#include "fx/limits.h"
#include "fx/onnx.h"

namespace fx::onnx {

namespace {

// realpath(3) as a string, or empty with errno set.
std::string real_path(const std::string& p) {
  std::unique_ptr<char, decltype(&std::free)> r(::realpath(p.c_str(), nullptr), &std::free);
  return r ? std::string(r.get()) : std::string();
}

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

ExternalDataReader folder_reader(const std::string& folder) {
  return [folder](const std::string& location, int64_t offset, int64_t length) -> Bytes {
    const std::string what = "external data '" + location + "'";
    // The cheap refusals first, with the clearest message.
    if (location.empty() || location[0] == '/' || location.find("..") != std::string::npos)
      throw Error(ErrorKind::Value,
                  what + ": the location must be a relative path inside the model's folder");
    const std::string root = real_path(folder.empty() ? std::string(".") : folder);
    if (root.empty())
      throw Error(ErrorKind::Value, what + ": cannot resolve the model's folder '" + folder +
                                        "' (" + std::strerror(errno) + ")");
    const std::string joined =
        folder.empty() || folder.back() == '/' ? folder + location : folder + "/" + location;
    const std::string target = real_path(joined);
    if (target.empty())
      throw Error(ErrorKind::Value,
                  what + ": cannot open '" + joined + "' (" + std::strerror(errno) + ")");
    // A symlink inside the folder may point anywhere: its real path must stay inside.
    if (target.compare(0, root.size(), root) != 0 ||
        (target.size() > root.size() && root != "/" && target[root.size()] != '/') ||
        target.size() == root.size())
      throw Error(ErrorKind::Value, what + " resolves to '" + target +
                                        "', outside the model's folder '" + root +
                                        "' (a symlink may not leave the folder)");
    Fd f;
    // O_NOFOLLOW: the resolved path has no symlink left, unless one was swapped in since.
    f.fd = ::open(target.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (f.fd < 0)
      throw Error(ErrorKind::Value,
                  what + ": cannot open '" + target + "' (" + std::strerror(errno) + ")");
    struct stat st {};
    if (::fstat(f.fd, &st) != 0)
      throw Error(ErrorKind::Value, what + ": cannot stat '" + target + "'");
    if (!S_ISREG(st.st_mode))
      throw Error(ErrorKind::Value,
                  what + ": '" + target + "' is " +
                      (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file") +
                      ", not a file of tensor data");
    const int64_t size = static_cast<int64_t>(st.st_size);
    // Without overflow: offset + length may exceed int64 for hostile values.
    if (offset < 0 || offset > size || (length >= 0 && length > size - offset))
      throw Error(ErrorKind::Parse,
                  what + ": bytes [" + std::to_string(offset) + ", " +
                      (length >= 0 ? std::to_string(offset) + " + " + std::to_string(length)
                                   : std::string("end")) +
                      ") are outside the file's " + std::to_string(size) + " bytes");
    const int64_t n = length >= 0 ? length : size - offset;
    checked_nbytes(Dtype::UInt8, n, what);
    auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n));
    for (int64_t done = 0; done < n;) {
      const ssize_t r = ::pread(f.fd, out->data() + done, static_cast<size_t>(n - done),
                                static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw Error(ErrorKind::Value, what + ": reading '" + target + "' failed at byte " +
                                          std::to_string(offset + done));
      done += r;
    }
    return out;
  };
}

}  // namespace fx::onnx
