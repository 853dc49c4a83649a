// ir.cpp — node lifetime (iterative release so million-node chains never recurse), hashing
// helpers and attribute sets.
#include "ir.h"

#include <cstring>
#include <string>
#include <vector>

#include "ops.h"

namespace lt {

std::string dims_str(const int64_t* d, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  return s + "]";
}

uint64_t hash_bytes(const void* p, size_t n, uint64_t seed) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  uint64_t h = hash_mix(seed + n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, b + i, 8);
    h = hash_combine(h, w);
  }
  if (i < n) {
    uint64_t w = 0;
    std::memcpy(&w, b + i, n - i);
    h = hash_combine(h, w);
  }
  return h;
}

const lower::OwnedAttr* AttrSet::find(const char* name) const {
  for (const auto& a : items)
    if (a.name == name) return &a;
  return nullptr;
}

AttrSet AttrSet::copy(const lt_attr* attrs, size_t num_attrs) {
  AttrSet out;
  out.items.reserve(num_attrs);
  for (size_t k = 0; k < num_attrs; ++k) {
    const lt_attr& a = attrs[k];
    out.items.push_back(lower::OwnedAttr::copy(a));
  }
  out.finish();
  return out;
}

void AttrSet::finish() {
  uint64_t h = hash_mix(items.size());
  view.clear();
  for (const auto& a : items) {
    h = hash_combine(h, hash_bytes(a.name.data(), a.name.size()));
    h = hash_combine(h, a.kind);
    switch (a.kind) {
      case LT_ATTR_INT:
        h = hash_combine(h, static_cast<uint64_t>(a.i));
        break;
      case LT_ATTR_FLOAT:
        h = hash_combine(h, hash_bytes(&a.f, sizeof a.f));
        break;
      case LT_ATTR_INTS:
        h = hash_combine(h, hash_bytes(a.ints.data(), a.ints.size() * 8, a.ints.size()));
        break;
      case LT_ATTR_STRING:
        h = hash_combine(h, hash_bytes(a.s.data(), a.s.size()));
        break;
      default:  // never stored: kinds are checked against the op's row first
        break;
    }
    view.push_back(a.view());
  }
  hash = h;
}

std::atomic<int64_t> g_nodes_alive{0};
thread_local uint32_t t_recompute_tag = 0;

namespace {
// Deletes nodes whose count reached zero; operands that also reach zero join the worklist.
void free_worklist(std::vector<Node*>& work) {
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    Node** ops = n->operands();
    for (uint32_t i = 0; i < n->num_operands; ++i)
      if (ops[i]->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) work.push_back(ops[i]);
    delete[] n->heap_ops;
    delete n;
    g_nodes_alive.fetch_sub(1, std::memory_order_relaxed);
  }
}
}  // namespace

void node_release(Node* n) noexcept {
  if (n->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Fast path for the common chain: walk while exactly one operand dies, no allocation.
  while (n) {
    Node* next = nullptr;
    Node** ops = n->operands();
    uint32_t dead = 0;
    std::vector<Node*> more;
    for (uint32_t i = 0; i < n->num_operands; ++i) {
      if (ops[i]->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        if (dead++ == 0)
          next = ops[i];
        else
          more.push_back(ops[i]);
      }
    }
    delete[] n->heap_ops;
    delete n;
    g_nodes_alive.fetch_sub(1, std::memory_order_relaxed);
    if (!more.empty()) {
      try {
        free_worklist(more);
      } catch (...) {
        // vector growth failed: leaking beats crashing inside a noexcept release
      }
    }
    n = next;
  }
}

void node_drop_operands(Node* n) noexcept {
  Node** ops = n->operands();
  uint32_t count = n->num_operands;
  n->num_operands = 0;
  for (uint32_t i = 0; i < count; ++i) node_release(ops[i]);
  delete[] n->heap_ops;
  n->heap_ops = nullptr;
}

}  // namespace lt

namespace lt {
std::string trace_location(const Node* n) {
  // Ops recorded inside LazyTensor's own headers (nn.hpp, free functions) say nothing useful.
  if (!n || !n->trace_file || std::strstr(n->trace_file, "/include/lazytensor/")) return {};
  const char* base = std::strrchr(n->trace_file, '/');
  return std::string(base ? base + 1 : n->trace_file) + ":" + std::to_string(n->trace_line);
}
}  // namespace lt
