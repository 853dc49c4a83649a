// regular_file.hpp — the one way LazyTensor opens a file it reads (docs/reliability.md).
// Every reader (config, checkpoints, the compile cache, plugins, datasets, tools) goes through
// lt::file::RegularFile: the open is non-blocking (a FIFO with no writer, or a device, never
// hangs the open), only a regular file is accepted (fstat S_ISREG: a FIFO, device, socket or
// directory is refused before a byte is read), and its size is known up front so that every
// length field can be checked against it before anything is allocated. Header-only and
// exception-free, so the core, core/lower, the header-only C++ API and the tools share it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace lt::file {

// "a FIFO", "a directory", ...: what a path that is not a regular file is, for messages.
inline const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// A regular file open for reading; closed on destruction. Its size is the size at open.
class RegularFile {
 public:
  RegularFile() = default;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  RegularFile(RegularFile&& o) noexcept { *this = std::move(o); }
  RegularFile& operator=(RegularFile&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
      size_ = o.size_;
      error_ = o.error_;
    }
    return *this;
  }
  ~RegularFile() { close(); }

  // Opens `path` (O_RDONLY | O_NONBLOCK | O_CLOEXEC) and checks it is a regular file. On failure
  // returns false with *why saying what is wrong ("no such file", "is a FIFO, not a regular
  // file", the system's message) and error() the errno (ENOENT for a missing file; EINVAL for a
  // file that is not regular).
  bool open(const std::string& path, std::string* why) {
    close();
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
      error_ = errno;
      if (why) *why = error_ == ENOENT ? "no such file" : "cannot open: " + errno_text(error_);
      return false;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      error_ = errno;
      if (why) *why = "cannot stat: " + errno_text(error_);
      close();
      return false;
    }
    if (!S_ISREG(st.st_mode)) {
      error_ = EINVAL;
      if (why) *why = std::string("is ") + kind_of(st.st_mode) + ", not a regular file";
      close();
      return false;
    }
    size_ = static_cast<uint64_t>(st.st_size);
    return true;
  }

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  int error() const { return error_; }
  // Gives the descriptor away (the caller closes it).
  int release() { return std::exchange(fd_, -1); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads exactly n bytes at `offset`; false (with *why) on an error or at end of file.
  bool read_at(void* dst, size_t n, uint64_t offset, std::string* why) const {
    auto* p = static_cast<unsigned char*>(dst);
    while (n > 0) {
      ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        if (why)
          *why = r < 0 ? "reading failed: " + errno_text(errno)
                       : std::string("end of file (truncated while read?)");
        return false;
      }
      p += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
    }
    return true;
  }

  // The whole file, refused before anything is allocated when it is over `max_bytes`.
  bool read_all(std::string* out, uint64_t max_bytes, std::string* why) const {
    if (size_ > max_bytes) {
      if (why)
        *why = "is " + std::to_string(size_) + " bytes; the limit is " + std::to_string(max_bytes);
      return false;
    }
    out->assign(static_cast<size_t>(size_), '\0');
    return read_at(out->data(), out->size(), 0, why);
  }

  static std::string errno_text(int err) { return std::strerror(err); }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  int error_ = 0;
};

}  // namespace lt::file
