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
#include "collect.h"
#include "plan.h"
#include "ir.h"

namespace lt {
namespace {

// Seconds a collective waits for the other ranks when LT_DIST_TIMEOUT is not set: long enough
// for a rank that evaluates or saves a checkpoint between steps, short enough that a job whose
// rank is stuck ends on its own (issue #29).
constexpr double kDefaultDistTimeout = 600;

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
    for (const lower::OwnedAttr& a : h.attrs->items)
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

namespace {

// What one rank runs: its items (each collective, each input's dtype and rank) and the dims of
// its inputs, flattened.
struct GraphSide {
  std::vector<std::string> items;
  std::vector<int64_t> dims;
  std::vector<size_t> dims_of;  // input k's dims start at dims_of[k] (inputs only)
  uint64_t structure = 0x636f6c6c65637473ULL, exact = 0;
};

GraphSide describe_side(const CompiledPlan& plan, const Collected& c) {
  GraphSide s;
  for (const HostNode& h : plan.host_nodes)
    if (h.collective) s.items.push_back(dist_describe(h));
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const Node* n = c.nodes[static_cast<size_t>(c.inputs[k])];
    s.items.push_back(
        fmt::format("input {} {} rank {}", k, lt_dtype_name(n->dtype), n->shape.size()));
    s.dims_of.push_back(s.dims.size());
    s.dims.insert(s.dims.end(), n->shape.begin(), n->shape.end());
  }
  for (const std::string& d : s.items)
    s.structure = hash_combine(s.structure, hash_bytes(d.data(), d.size(), d.size()));
  s.exact = hash_combine(s.structure,
                         hash_bytes(s.dims.data(), s.dims.size() * sizeof(int64_t), s.dims.size()));
  return s;
}

// The last set of per-rank exact hashes found consistent (uneven shards: checked once).
std::mutex g_checked_mu;
std::vector<uint64_t> g_checked;

}  // namespace

void dist_check_graph(const CompiledPlan& plan, const Collected& c) {
  if (!plan.collectives) return;
  Group& g = group();
  const lt_dist_transport* t = g.t;
  if (!g.initialized || !t) {
    for (const HostNode& h : plan.host_nodes)
      if (h.collective)
        fail(LT_STATUS_UNSUPPORTED, "{}: the process group is not initialised (call lt_dist_init)",
             h.name);
  }
  const GraphSide me = describe_side(plan, c);
  const size_t world = static_cast<size_t>(g.size);
  uint64_t mine[2] = {me.structure, me.exact};
  std::vector<uint64_t> all(2 * world);
  call("graph check (all_gather of each rank's graph hashes)",
       [&](char* e, size_t n) { return t->all_gather(mine, sizeof mine, all.data(), e, n); });
  bool same_structure = true, same_exact = true;
  std::vector<uint64_t> exacts(world);
  for (size_t r = 0; r < world; ++r) {
    same_structure = same_structure && all[2 * r] == me.structure;
    same_exact = same_exact && all[2 * r + 1] == me.exact;
    exacts[r] = all[2 * r + 1];
  }
  if (same_exact) return;
  if (same_structure) {
    std::lock_guard lk(g_checked_mu);
    if (exacts == g_checked) return;  // these shards were found consistent before
  }
  // Every rank saw the same hashes, so every rank takes this path: a second exchange is safe.
  // Fixed-size records: the dims (structure equal: the same count on every rank) or the text.
  if (same_structure) {
    std::vector<int64_t> dims(me.dims.size() * world);
    if (!me.dims.empty())
      call("graph check", [&](char* e, size_t n) {
        return t->all_gather(me.dims.data(), me.dims.size() * sizeof(int64_t), dims.data(), e, n);
      });
    const size_t nd = me.dims.size();
    for (size_t k = 0; k < me.dims_of.size(); ++k) {
      const size_t begin = me.dims_of[k], end = k + 1 < me.dims_of.size() ? me.dims_of[k + 1] : nd;
      for (size_t d = begin; d < end; ++d) {
        // One global batch split over ranks: non-increasing by rank, at most one apart.
        bool ok = true;
        for (size_t r = 1; r < world; ++r) {
          const int64_t prev = dims[(r - 1) * nd + d], cur = dims[r * nd + d];
          ok = ok && cur <= prev && dims[d] - cur <= 1;
        }
        if (ok) continue;
        std::string msg = fmt::format(
            "ranks traced different graphs: input {} of the graph (first collective: {}) has "
            "shape",
            k, me.items.empty() ? "none" : me.items.front());
        for (size_t r = 0; r < world; ++r) {
          std::vector<int64_t> shape(dims.begin() + static_cast<ptrdiff_t>(r * nd + begin),
                                     dims.begin() + static_cast<ptrdiff_t>(r * nd + end));
          msg += fmt::format("{} {} on rank {}", r ? "," : "", dims_str(shape.data(), shape.size()),
                             r);
        }
        msg +=
            "; the shards of one global batch differ by at most one row (a different batch "
            "size per rank?)";
        throw Error(LT_STATUS_DISTRIBUTED, msg);
      }
    }
    std::lock_guard lk(g_checked_mu);
    g_checked = exacts;
    return;
  }
  constexpr size_t kText = 1024;
  std::string text;
  for (const std::string& i : me.items) {
    if (i.rfind("input ", 0) == 0) continue;
    text += (text.empty() ? "" : ", ") + i;
  }
  std::string inputs;
  for (size_t k = 0; k < me.dims_of.size(); ++k) {
    const size_t begin = me.dims_of[k],
                 end = k + 1 < me.dims_of.size() ? me.dims_of[k + 1] : me.dims.size();
    const Node* n = c.nodes[static_cast<size_t>(c.inputs[k])];
    inputs += fmt::format("{}{} {}", k ? ", " : "", lt_dtype_name(n->dtype),
                          dims_str(me.dims.data() + begin, end - begin));
  }
  text = "[" + text + "]" + (inputs.empty() ? "" : " on inputs [" + inputs + "]");
  if (text.size() >= kText) text = text.substr(0, kText - 4) + "...";
  std::vector<char> mine_text(kText, 0), texts(kText * world, 0);
  std::memcpy(mine_text.data(), text.data(), std::min(text.size(), kText - 1));
  call("graph check", [&](char* e, size_t n) {
    return t->all_gather(mine_text.data(), kText, texts.data(), e, n);
  });
  std::string msg = "collective mismatch between ranks (the ranks traced different graphs):";
  for (size_t r = 0; r < world; ++r)
    msg += fmt::format(" rank {} runs {};", r, std::string(texts.data() + r * kText));
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
      // LT_DIST_TIMEOUT: seconds a collective waits for the other ranks (docs/distributed.md);
      // by default kDefaultDistTimeout, so that no job hangs forever; 0 waits forever.
      double timeout = kDefaultDistTimeout;
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
