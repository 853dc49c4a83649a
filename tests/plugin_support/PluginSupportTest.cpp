// PluginSupportTest.cpp — guard() turns exceptions into the errors each plugin's wording names.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "lt_plugin_support.hpp"

// While set, every global allocation fails: the only way to reach the out-of-memory fallback.
static bool g_fail_allocations = false;

void* operator new(std::size_t n) {
  if (g_fail_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace lt::plugin_support {
namespace {

constexpr ErrorWording kPrefixed{.prefix = "p: ",
                                 .out_of_memory = "out of memory",
                                 .oom_fallback = "no memory at all",
                                 .internal = "",
                                 .unknown = "unknown exception",
                                 .invalid_argument = nullptr};
constexpr ErrorWording kSelfNaming{.prefix = "",
                                   .out_of_memory = "q: out of memory",
                                   .oom_fallback = "q: out of memory",
                                   .internal = "q: internal error: ",
                                   .unknown = "q: internal error",
                                   .invalid_argument = "q: "};

struct Owned {
  lt_plugin_error* e;
  explicit Owned(lt_plugin_error* err) : e(err) {}
  Owned(const Owned&) = delete;
  ~Owned() { error_destroy(e); }
  std::string message() const { return error_message(e); }
  lt_status_code code() const { return error_code(e); }
};

ErrorFactory g_prefixed(kPrefixed);
ErrorFactory g_self_naming(kSelfNaming);

template <class F>
Owned run(ErrorFactory& errors, F&& body) {
  return Owned(errors.guard(std::forward<F>(body)));
}

TEST(PluginSupport, SuccessIsNull) {
  EXPECT_EQ(run(g_prefixed, [] {}).e, nullptr);
  EXPECT_EQ(error_code(nullptr), LT_STATUS_OK);
  EXPECT_STREQ(error_message(nullptr), "");
  error_destroy(nullptr);
}

TEST(PluginSupport, StatusErrorKeepsItsCodeAndGetsOnlyThePrefix) {
  Owned a = run(g_prefixed, [] { throw StatusError(LT_STATUS_NOT_FOUND, "device 3"); });
  EXPECT_EQ(a.code(), LT_STATUS_NOT_FOUND);
  EXPECT_EQ(a.message(), "p: device 3");
  Owned b = run(g_self_naming, [] { throw StatusError(LT_STATUS_UNSUPPORTED, "q: no"); });
  EXPECT_EQ(b.code(), LT_STATUS_UNSUPPORTED);
  EXPECT_EQ(b.message(), "q: no");
}

TEST(PluginSupport, ForeignExceptionsUseThePluginsWording) {
  EXPECT_EQ(run(g_prefixed, [] { throw std::bad_alloc(); }).message(), "p: out of memory");
  EXPECT_EQ(run(g_prefixed, [] { throw std::bad_alloc(); }).code(), LT_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(run(g_prefixed, [] { throw std::runtime_error("x"); }).message(), "p: x");
  EXPECT_EQ(run(g_prefixed, [] { throw 7; }).message(), "p: unknown exception");
  EXPECT_EQ(run(g_self_naming, [] { throw std::runtime_error("x"); }).message(),
            "q: internal error: x");
  EXPECT_EQ(run(g_self_naming, [] { throw 7; }).code(), LT_STATUS_INTERNAL);
  EXPECT_EQ(run(g_self_naming, [] { throw 7; }).message(), "q: internal error");
}

TEST(PluginSupport, InvalidArgumentMapsOnlyWhenTheWordingSaysSo) {
  Owned a = run(g_self_naming, [] { throw std::invalid_argument("stoul"); });
  EXPECT_EQ(a.code(), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(a.message(), "q: stoul");
  Owned b = run(g_prefixed, [] { throw std::invalid_argument("stoul"); });
  EXPECT_EQ(b.code(), LT_STATUS_INTERNAL);
  EXPECT_EQ(b.message(), "p: stoul");
}

TEST(PluginSupport, BodyMayReturnItsOwnError) {
  Owned a = run(g_self_naming, []() -> lt_plugin_error* {
    return g_self_naming.make(LT_STATUS_ABI_MISMATCH, "q: v2");
  });
  EXPECT_EQ(a.code(), LT_STATUS_ABI_MISMATCH);
  EXPECT_EQ(a.message(), "q: v2");
  EXPECT_EQ(run(g_self_naming, []() -> lt_plugin_error* { return nullptr; }).e, nullptr);
}

TEST(PluginSupport, AllocationFailureReturnsTheStaticFallback) {
  g_fail_allocations = true;
  lt_plugin_error* e = g_prefixed.guard([] { throw std::bad_alloc(); });
  lt_plugin_error* again = g_prefixed.make(LT_STATUS_INTERNAL, "anything");
  g_fail_allocations = false;
  EXPECT_EQ(e, again);
  EXPECT_EQ(error_code(e), LT_STATUS_OUT_OF_MEMORY);
  EXPECT_STREQ(error_message(e), "p: no memory at all");
  error_destroy(e);  // must not free the fallback: it is still usable afterwards
  EXPECT_STREQ(error_message(again), "p: no memory at all");
}

}  // namespace
}  // namespace lt::plugin_support
