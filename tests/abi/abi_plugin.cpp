// abi_plugin.cpp — ABI-compatibility test plugins, one per ABI_CASE (see CMakeLists.txt):
// older minor (struct_size without the optional trailing stats entry, whose slot holds a
// poison pointer the core must not call), newer minor (a larger table with unknown trailing
// fields), another major, a backend that claims exp but fails to compile it, and a minor-2
// plugin (before buffer donation).
#include <cstdlib>

#include "mini_backend.h"

namespace {

#define ABI_OLDER_MINOR 1
#define ABI_NEWER_MINOR 2
#define ABI_OTHER_MAJOR 3
#define ABI_COMPILE_FAILS 4
#define ABI_MINOR2 5

// Called only if the core reads past struct_size: the test then dies loudly.
lt_plugin_error* poison_stats(lt_plugin_stats_args*) {
  std::abort();
}

// A table from a future minor version: our fields, then ones this core has never heard of.
struct future_api {
  lt_plugin_api base;
  lt_plugin_error* (*future_feature)(void*);
  uint64_t future_flags;
};

lt_plugin_error* compile_without_exp(lt_plugin_compile_args* a) {
  for (size_t i = 0; i < a->graph->num_nodes; ++i)
    if (std::strcmp(a->graph->nodes[i].op, "exp") == 0)
      return mini::err(LT_STATUS_UNSUPPORTED, "exp is claimed but its kernel is missing");
  return mini::compile(a);
}

// A plugin built against ABI 1.2 (before buffer donation): its compile args end at `dynamic`.
// The core must never offer it a donation (it cannot accept one and would get aliased
// buffers only by the core's mistake); an offer fails the compile, and so the test.
lt_plugin_error* compile_minor2(lt_plugin_compile_args* a) {
  if (a->struct_size >= LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE && a->donor_inputs)
    return mini::err(LT_STATUS_INTERNAL, "a donation was offered to a minor-2 plugin");
  return mini::compile(a);
}

future_api make() {
  future_api f{};
  f.base = mini::table(ABI_NAME);
#if ABI_CASE == ABI_OLDER_MINOR
  f.base.struct_size = offsetof(lt_plugin_api, stats);  // built before `stats` existed
  f.base.stats = poison_stats;
#elif ABI_CASE == ABI_NEWER_MINOR
  f.base.struct_size = sizeof(future_api);
  f.base.abi_minor = LT_PLUGIN_ABI_MINOR + 1;
  f.future_feature = reinterpret_cast<lt_plugin_error* (*)(void*)>(&std::abort);
  f.future_flags = ~uint64_t{0};
#elif ABI_CASE == ABI_OTHER_MAJOR
  f.base.abi_major = LT_PLUGIN_ABI_MAJOR + 1;
  f.base.abi_minor = 7;
#elif ABI_CASE == ABI_COMPILE_FAILS
  f.base.compile = compile_without_exp;
#elif ABI_CASE == ABI_MINOR2
  f.base.abi_minor = 2;
  f.base.compile = compile_minor2;
#endif
  return f;
}

const future_api kTable = make();

}  // namespace

extern "C" LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &kTable.base;
}
