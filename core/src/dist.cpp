// dist.cpp — lt_dist_init and friends: opens the MPI transport (liblazytensor_mpi.so, beside
// liblazytensor) with dlopen, keeps rank and world size, and runs the collective nodes the
// executor hands it, checking first that every rank is about to run the same collectives.
#include "dist.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <type_traits>

#include "dist_transport.h"
#include "error.h"
#include "plan.h"
#include "ir.h"

namespace lt {
namespace {

struct Group {
  std::mutex mu;
  bool initialized = false;
  bool finalized = false;  // MPI cannot be initialised twice in one process
  int rank = 0, size = 1;
  const lt_dist_transport* t = nullptr;
  void* handle = nullptr;
};
Group& group() {
  static Group* g = new Group;  // never destroyed: lt_dist_abort may run during teardown
  return *g;
}

// Calls a transport function with an error buffer; throws DISTRIBUTED naming this rank.
// what: the operation, a string or a function that builds one (only on failure).
template <class W, class F>
void call(W&& what, F&& f) {
  char err[512] = {0};
  if (f(err, sizeof err) != 0) {
    err[sizeof err - 1] = 0;
    std::string w;
    if constexpr (std::is_invocable_v<W>)
      w = what();
    else
      w = what;
    fail(LT_STATUS_DISTRIBUTED, "{} on rank {} of {} failed: {}", w, group().rank, group().size,
         err[0] ? err : "MPI reported an error");
  }
}

const lt_dist_transport* load_transport() {
#ifndef LT_HAVE_MPI
  fail(LT_STATUS_UNSUPPORTED,
       "lt_dist_init: LazyTensor was built without MPI (CMake found no MPI C library, or "
       "LT_WITH_MPI=OFF); install an MPI (e.g. libopenmpi-dev) and rebuild to train across "
       "processes");
#else
  Group& g = group();
  if (g.t) return g.t;
  // Beside liblazytensor itself (build tree and install tree alike), else the loader's path.
  std::string path = LT_DIST_TRANSPORT_FILE;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&lt_dist_init), &info) && info.dli_fname) {
    std::filesystem::path beside =
        std::filesystem::path(info.dli_fname).parent_path() / LT_DIST_TRANSPORT_FILE;
    std::error_code ec;
    if (std::filesystem::exists(beside, ec)) path = beside.string();
  }
  // RTLD_GLOBAL: Open MPI's own components (dlopened by libmpi) need libmpi's symbols.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* e = dlerror();
    fail(LT_STATUS_UNSUPPORTED, "lt_dist_init: cannot load the MPI transport {}: {}", path,
         e ? e : "unknown error");
  }
  auto get = reinterpret_cast<lt_dist_get_transport_fn>(dlsym(h, LT_DIST_TRANSPORT_SYMBOL));
  const lt_dist_transport* t = get ? get() : nullptr;
  if (!t || t->struct_size < LT_DIST_TRANSPORT_STRUCT_SIZE) {
    dlclose(h);
    fail(LT_STATUS_ABI_MISMATCH, "lt_dist_init: {} is not a transport of this LazyTensor build",
         path);
  }
  g.handle = h;
  g.t = t;
  return t;
#endif
}

const char* reduce_name(int64_t r) {
  return r == 0 ? "sum" : r == 1 ? "mean" : r == 2 ? "max" : "?";
}

int64_t attr_or(const HostNode& h, const char* name, int64_t dflt) {
  if (h.attrs)
    for (const StoredAttr& a : h.attrs->items)
      if (a.name == name) return a.i;
  return dflt;
}

}  // namespace

bool dist_initialized() noexcept {
  Group& g = group();
  std::lock_guard lk(g.mu);
  return g.initialized;
}

int dist_rank(const char* op) {
  Group& g = group();
  std::lock_guard lk(g.mu);
  if (!g.initialized)
    fail(LT_STATUS_UNSUPPORTED, "{}: the process group is not initialised (call lt_dist_init)", op);
  return g.rank;
}

int dist_world_size(const char* op) {
  Group& g = group();
  std::lock_guard lk(g.mu);
  if (!g.initialized)
    fail(LT_STATUS_UNSUPPORTED, "{}: the process group is not initialised (call lt_dist_init)", op);
  return g.size;
}

std::string dist_describe(const HostNode& h) {
  std::string what = h.name;
  if (h.name == "all_reduce")
    what += fmt::format("({})", reduce_name(attr_or(h, "reduce", 0)));
  else if (h.name == "broadcast")
    what += fmt::format("(root {})", attr_or(h, "root", 0));
  const lower::Desc& d = h.operand_descs.at(0);
  return fmt::format("{} {} {}", what, lt_dtype_name(d.dtype),
                     dims_str(d.shape.data(), d.shape.size()));
}

void dist_check_collectives(const std::vector<const HostNode*>& nodes) {
  if (nodes.empty()) return;
  Group& g = group();
  const lt_dist_transport* t = g.t;
  if (!g.initialized || !t)
    fail(LT_STATUS_UNSUPPORTED, "{}: the process group is not initialised (call lt_dist_init)",
         nodes.front()->name);
  uint64_t h = 0x636f6c6c65637473ULL;
  std::string text;
  for (const HostNode* n : nodes) {
    std::string d = dist_describe(*n);
    h = hash_combine(h, hash_bytes(d.data(), d.size(), d.size()));
    text += (text.empty() ? "" : ", ") + d;
  }
  std::vector<uint64_t> all(static_cast<size_t>(g.size));
  call("collective check (all_gather of each rank's collectives)",
       [&](char* e, size_t n) { return t->all_gather(&h, sizeof h, all.data(), e, n); });
  bool same = true;
  for (uint64_t x : all) same = same && x == h;
  if (same) return;
  // Every rank saw the same hashes, so every rank takes this path: a second exchange is safe.
  constexpr size_t kText = 480;
  std::vector<char> mine(kText, 0), texts(kText * all.size(), 0);
  std::memcpy(mine.data(), text.data(), std::min(text.size(), kText - 1));
  call("collective check",
       [&](char* e, size_t n) { return t->all_gather(mine.data(), kText, texts.data(), e, n); });
  std::string msg = "collective mismatch between ranks (the ranks traced different graphs):";
  for (size_t r = 0; r < all.size(); ++r)
    msg += fmt::format(" rank {} runs [{}];", r, std::string(texts.data() + r * kText));
  msg.pop_back();
  throw Error(LT_STATUS_DISTRIBUTED, msg);
}

size_t dist_output_bytes(const HostNode& h, size_t in_bytes) {
  return h.name == "all_gather" ? in_bytes * static_cast<size_t>(group().size) : in_bytes;
}

void dist_run(const HostNode& h, const void* in, size_t in_bytes, void* out) {
  Group& g = group();
  const lt_dist_transport* t = g.t;
  if (!g.initialized || !t)
    fail(LT_STATUS_UNSUPPORTED, "{}: the process group is not initialised (call lt_dist_init)",
         h.name);
  // Described only on failure: this runs for every collective of every step.
  auto what = [&] { return dist_describe(h); };
  if (h.name == "all_gather") {
    call(what, [&](char* e, size_t n) { return t->all_gather(in, in_bytes, out, e, n); });
    return;
  }
  if (in_bytes) std::memcpy(out, in, in_bytes);
  if (h.name == "broadcast") {
    int64_t root = attr_or(h, "root", 0);
    if (root >= g.size)
      fail(LT_STATUS_INVALID_ARGUMENT, "{}: root {} is not a rank of a group of {}", what(), root,
           g.size);
    call(what, [&](char* e, size_t n) {
      return t->broadcast(out, in_bytes, static_cast<int>(root), e, n);
    });
    return;
  }
  const size_t count = in_bytes / lt_dtype_size(h.dtype);
  const int reduce = static_cast<int>(attr_or(h, "reduce", 0));
  call(what, [&](char* e, size_t n) { return t->all_reduce(out, count, h.dtype, reduce, e, n); });
}

}  // namespace lt

using namespace lt;

LT_API lt_error* lt_dist_init(int64_t* rank, int64_t* world_size) {
  return guard([&] {
    Group& g = group();
    std::lock_guard lk(g.mu);
    if (!g.initialized) {
      if (g.finalized)
        fail(LT_STATUS_UNSUPPORTED,
             "lt_dist_init: the process group was finalised; MPI cannot start twice in one "
             "process");
      // LT_DIST_TIMEOUT: seconds a collective waits for the other ranks (docs/distributed.md).
      double timeout = 0;
      if (const char* v = std::getenv("LT_DIST_TIMEOUT"); v && *v) {
        char* end = nullptr;
        timeout = std::strtod(v, &end);
        if (*end || !(timeout >= 0) || timeout > 1e9)
          fail(LT_STATUS_INVALID_ARGUMENT,
               "lt_dist_init: LT_DIST_TIMEOUT '{}' is not a number of seconds (0: no limit)", v);
      }
      const lt_dist_transport* t = load_transport();
      int r = 0, s = 1;
      char err[512] = {0};
      if (t->init(&r, &s, err, sizeof err) != 0)
        fail(LT_STATUS_DISTRIBUTED, "lt_dist_init: {}", err);
      t->set_timeout(timeout);
      g.rank = r;
      g.size = s;
      g.initialized = true;
    }
    if (rank) *rank = g.rank;
    if (world_size) *world_size = g.size;
  });
}

LT_API lt_error* lt_dist_finalize(void) {
  return guard([&] {
    Group& g = group();
    std::lock_guard lk(g.mu);
    if (!g.initialized) return;
    g.initialized = false;
    g.finalized = true;
    char err[512] = {0};
    if (g.t->finalize(err, sizeof err) != 0)
      fail(LT_STATUS_DISTRIBUTED, "lt_dist_finalize: {}", err);
  });
}

LT_API int lt_dist_is_initialized(void) {
  return dist_initialized() ? 1 : 0;
}

LT_API int64_t lt_dist_rank(void) {
  Group& g = group();
  std::lock_guard lk(g.mu);
  return g.initialized ? g.rank : 0;
}

LT_API int64_t lt_dist_world_size(void) {
  Group& g = group();
  std::lock_guard lk(g.mu);
  return g.initialized ? g.size : 1;
}

LT_API void lt_dist_abort(int code, const char* message) {
  Group& g = group();
  if (message && *message) {
    std::fprintf(stderr, "lazytensor: rank %d of %d aborts the process group: %s\n", g.rank, g.size,
                 message);
    std::fflush(stderr);
  }
  if (g.initialized && g.t) g.t->abort(code ? code : 1);  // MPI_Abort: the others stop too
  std::_Exit(code ? code : 1);
}
