// attention.cpp — the fused attention kernel and its pattern matcher
// (lazytensor/host/attention.hpp).
#include "lazytensor/host/attention.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "kernels.h"
#include "lazytensor/lower/gemm_layout.hpp"
#include "lazytensor/lower/graph.hpp"

namespace lt::host {
namespace {

struct Matcher {
  const lt_graph& g;
  const Readers& uses;
  const std::vector<char>& taken;
  AttentionMatch m;

  const lt_graph_node& node(int32_t v) const { return g.nodes[v]; }
  bool is(int32_t v, std::string_view op) const { return node(v).op == op; }
  bool f32(int32_t v) const { return node(v).dtype == LT_DTYPE_F32; }
  int64_t numel(int32_t v) const { return lower::DescRef(node(v)).numel(); }
  bool same_shape(int32_t a, int32_t b) const {
    const lt_graph_node &x = node(a), &y = node(b);
    return x.rank == y.rank && std::equal(x.shape, x.shape + x.rank, y.shape);
  }
  // A value the fused step replaces: read once, by the pattern, and no graph output.
  bool inner(int32_t v) const { return uses.only_one(v) && !taken[v]; }
  // Single-use reshapes from v down to the value they reshape (recorded as interior).
  int32_t strip(int32_t v) {
    while (is(v, "reshape") && inner(v)) {
      m.interior.push_back(v);
      v = node(v).operands[0];
    }
    return v;
  }
  // A GEMM operand read as stored (trans false) or through a single-use matrix transpose.
  bool operand(int32_t v, int32_t* read, bool* trans) {
    *trans = false;
    if (lower::is_matrix_transpose(g.nodes[v])) {
      // A transpose read by other GEMMs too is folded into them by StepProgram, never stored.
      if (!inner(v)) return false;
      m.interior.push_back(v);
      *trans = true;
      v = node(v).operands[0];
    }
    *read = v;
    return f32(v);
  }

  // The scores Q·K: `s` (after reshapes) is a single-use f32 matmul of the output's rank and
  // batch whose last two dims are [m, n].
  bool scores(int32_t s, int32_t softmax) {
    const size_t mark = m.interior.size();
    const int32_t t = strip(s);
    const lt_graph_node& out = node(m.output);
    const lt_graph_node& tn = node(t);
    const lt_graph_node& sm = node(softmax);
    const bool ok = is(t, "matmul") && inner(t) && f32(t) && tn.rank == out.rank &&
                    (tn.rank == 2 || tn.shape[0] == out.shape[0]) &&
                    tn.shape[tn.rank - 2] == sm.shape[sm.rank - 2] &&
                    tn.shape[tn.rank - 1] == sm.shape[sm.rank - 1] && numel(t) == numel(softmax);
    if (ok) {
      m.interior.push_back(t);
      bool trans_q = false;
      const int32_t q = tn.operands[0];
      if (lower::is_matrix_transpose(g.nodes[q]))
        return fail(mark);  // a transposed Q: left to the GEMMs
      if (operand(q, &m.q, &trans_q) && operand(tn.operands[1], &m.k, &m.trans_k)) return true;
    }
    return fail(mark);
  }
  bool fail(size_t mark) {
    m.interior.resize(mark);
    return false;
  }
  // Optional scale (mul by / div by a one-element f32 value), then the scores.
  bool scaled(int32_t x, int32_t softmax) {
    const lt_graph_node& n = node(x);
    if ((is(x, "mul") || is(x, "div")) && inner(x) && f32(x) && same_shape(x, softmax)) {
      const size_t mark = m.interior.size();
      m.interior.push_back(x);
      for (int side = 0; side < (is(x, "mul") ? 2 : 1); ++side) {
        const int32_t c = n.operands[side], s = n.operands[1 - side];
        if (c == s || numel(s) != 1 || !f32(s) || !same_shape(c, x)) continue;
        if (scores(c, softmax)) {
          m.scale = s;
          m.scale_divides = is(x, "div");
          return true;
        }
      }
      fail(mark);
    }
    return scores(x, softmax);
  }

  // Optional where(cond, scaled scores, fill), then the scale.
  bool selected(int32_t x, int32_t softmax) {
    const lt_graph_node& n = node(x);
    if (is(x, "where") && inner(x) && f32(x) && same_shape(x, softmax)) {
      const int32_t c = n.operands[0], a = n.operands[1], f = n.operands[2];
      if (node(c).dtype == LT_DTYPE_BOOL && a != f && numel(f) == 1 && f32(f) && same_shape(a, x)) {
        const size_t mark = m.interior.size();
        m.interior.push_back(x);
        if (scaled(a, softmax)) {
          m.cond = c;
          m.fill = f;
          return true;
        }
        fail(mark);
      }
    }
    return scaled(x, softmax);
  }

  bool match(int32_t pv) {
    const lt_graph_node& out = node(pv);
    if (!is(pv, "matmul") || !f32(pv) || (out.rank != 2 && out.rank != 3)) return false;
    m.output = pv;
    const lt_graph_node& an = node(out.operands[0]);
    const int32_t sm = strip(out.operands[0]);
    const lt_graph_node& smn = node(sm);
    if (!is(sm, "softmax") || !inner(sm) || !f32(sm) || smn.rank < 2) return false;
    const int64_t axis = lower::Attrs(smn).i("axis");
    if (axis != static_cast<int64_t>(smn.rank) - 1 && axis != -1) return false;
    if (smn.shape[smn.rank - 1] != an.shape[an.rank - 1] ||
        smn.shape[smn.rank - 2] != an.shape[an.rank - 2] || numel(sm) != numel(out.operands[0]))
      return false;
    m.interior.push_back(sm);
    if (!operand(out.operands[1], &m.v, &m.trans_v)) return false;
    const int32_t x = smn.operands[0];
    const lt_graph_node& xn = node(x);
    if (is(x, "add") && inner(x) && f32(x) && same_shape(x, sm)) {
      const size_t mark = m.interior.size();
      m.interior.push_back(x);
      for (int side = 0; side < 2; ++side) {
        const int32_t c = xn.operands[side], mk = xn.operands[1 - side];
        if (c == mk || !f32(mk) || !same_shape(c, x)) continue;
        if (selected(c, sm)) {
          m.mask = mk;
          return true;
        }
      }
      fail(mark);
    }
    return selected(x, sm);
  }
};

}  // namespace

std::vector<AttentionMatch> find_attention(const lt_graph& g) {
  std::vector<AttentionMatch> found;
  // LT_HOST_ATTENTION=off: the decomposition's steps instead (before/after in one build).
  static const bool off = [] {
    const char* e = std::getenv("LT_HOST_ATTENTION");
    return e && std::string_view(e) == "off";
  }();
  if (off) return found;
  if (std::none_of(g.nodes, g.nodes + g.num_nodes,
                   [](const lt_graph_node& n) { return std::string_view(n.op) == "softmax"; }))
    return found;
  const Readers uses(g);
  std::vector<char> taken(g.num_nodes, 0);     // interior or output of an earlier match
  std::vector<char> replaced(g.num_nodes, 0);  // interior of an earlier match
  for (size_t i = 0; i < g.num_nodes; ++i) {
    if (std::string_view(g.nodes[i].op) != "matmul") continue;
    Matcher mt{g, uses, taken, {}};
    if (!mt.match(static_cast<int32_t>(i))) continue;
    AttentionMatch& m = mt.m;
    // The values read must not be replaced by this match or an earlier one.
    bool clash = false;
    for (int32_t v : {m.q, m.k, m.v, m.scale, m.mask, m.cond, m.fill})
      clash =
          clash || (v >= 0 && (replaced[v] || std::count(m.interior.begin(), m.interior.end(), v)));
    if (clash) continue;
    std::sort(m.interior.begin(), m.interior.end());
    for (int32_t v : m.interior) taken[v] = replaced[v] = 1;
    taken[m.output] = 1;
    found.push_back(std::move(m));
  }
  return found;
}

bool in_attention(const lt_graph& g, size_t softmax) {
  const lt_graph_node& sm = g.nodes[softmax];
  if (std::string_view(sm.op) != "softmax" || sm.dtype != LT_DTYPE_F32) return false;
  // A few steps back through add / mul / div / where / reshape must reach a matmul.
  std::vector<int32_t> frontier = {sm.operands[0]};
  bool matmul = false;
  for (int hops = 0; hops < 8 && !frontier.empty() && !matmul; ++hops) {
    std::vector<int32_t> next;
    for (int32_t v : frontier) {
      const lt_graph_node& n = g.nodes[v];
      const std::string_view op = n.op;
      matmul = matmul || op == "matmul";
      if (op == "add" || op == "mul" || op == "div" || op == "where" || op == "reshape")
        next.insert(next.end(), n.operands, n.operands + n.num_operands);
    }
    frontier = std::move(next);
  }
  if (!matmul) return false;
  for (const AttentionMatch& m : find_attention(g))
    if (std::count(m.interior.begin(), m.interior.end(), static_cast<int32_t>(softmax)))
      return true;
  return false;
}

PlannedAttention plan_attention(const lt_graph& g, const lower::KernelPlan& plan) {
  PlannedAttention out;
  out.replaced.assign(plan.steps.size(), 0);
  out.at.assign(plan.steps.size(), -1);
  const std::vector<AttentionMatch> found = find_attention(g);
  if (found.empty()) return out;
  std::vector<int32_t> match_of(g.num_nodes, -1);  // per interior node
  for (size_t a = 0; a < found.size(); ++a)
    for (int32_t v : found[a].interior) match_of[v] = static_cast<int32_t>(a);
  auto constant = [&](int32_t v) { return std::string_view(g.nodes[v].op) == "full"; };
  std::vector<char> fusable(found.size(), 1);
  std::vector<int32_t> step_match(plan.steps.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    for (int32_t v : plan.steps[s].nodes)
      if (match_of[v] >= 0) step_match[s] = match_of[v];
    const int32_t a = step_match[s];
    if (a < 0) continue;
    // Anything else computed there keeps the decomposition's steps.
    for (int32_t v : plan.steps[s].nodes)
      if (match_of[v] != a &&
          !((v == found[a].scale || v == found[a].fill) && constant(v) && !plan.stored[v]))
        fusable[a] = 0;
  }
  for (size_t a = 0; a < found.size(); ++a) {
    const AttentionMatch& m = found[a];
    for (int32_t v : {m.q, m.k, m.v, m.mask, m.cond, m.scale, m.fill})
      if (v >= 0 && !plan.stored[v] && !((v == m.scale || v == m.fill) && constant(v)))
        fusable[a] = 0;
  }
  std::vector<int32_t> index(found.size(), -1);
  for (size_t a = 0; a < found.size(); ++a)
    if (fusable[a]) {
      index[a] = static_cast<int32_t>(out.matches.size());
      out.matches.push_back(found[a]);
    }
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const lower::Step& st = plan.steps[s];
    out.replaced[s] = step_match[s] >= 0 && fusable[step_match[s]];
    if (st.kind != lower::StepKind::kHost) continue;
    for (size_t a = 0; a < found.size(); ++a)
      if (fusable[a] && found[a].output == st.anchor) out.at[s] = index[a];
  }
  return out;
}

AttentionDims attention_dims(const lt_graph& g, const AttentionMatch& m) {
  AttentionDims d;
  const lt_graph_node& out = g.nodes[m.output];
  const size_t r = out.rank;
  d.batch = r == 3 ? out.shape[0] : 1;
  d.m = out.shape[r - 2];
  d.dv = out.shape[r - 1];
  const lt_graph_node& q = g.nodes[m.q];
  d.d = q.shape[r - 1];
  const lt_graph_node& a = g.nodes[out.operands[0]];
  d.n = a.shape[r - 1];
  d.trans_k = m.trans_k;
  d.trans_v = m.trans_v;
  d.scale_divides = m.scale_divides;
  int32_t sm = -1;
  for (int32_t v : m.interior)
    if (std::string_view(g.nodes[v].op) == "softmax") sm = v;
  const lt_graph_node& s = g.nodes[sm];
  d.lead.assign(s.shape, s.shape + s.rank - 2);
  // Row-major strides of a value broadcast to the scores, right-aligned, 0 along broadcast dims:
  // per leading dim, then the query and key axes.
  auto broadcast = [&](int32_t value, std::vector<int64_t>& lead, int64_t& si, int64_t& sj) {
    lead.assign(d.lead.size(), 0);
    if (value < 0) return;
    const lt_graph_node& b = g.nodes[value];
    std::vector<int64_t> stride(s.rank, 0);
    int64_t step = 1;
    for (size_t i = b.rank; i-- > 0;) {
      stride[s.rank - b.rank + i] = b.shape[i] == 1 ? 0 : step;
      step *= b.shape[i];
    }
    std::copy(stride.begin(), stride.end() - 2, lead.begin());
    si = stride[s.rank - 2];
    sj = stride[s.rank - 1];
  };
  broadcast(m.mask, d.mask_stride, d.mask_si, d.mask_sj);
  broadcast(m.cond, d.cond_stride, d.cond_si, d.cond_sj);
  return d;
}

namespace {

// Query rows per block: the block's scores (rows x n floats) stay within 16 KB of L1 where the
// keys allow it, at least 16 rows (a GEMM of fewer rows reads K and V again for little work),
// at most 64. At 128 keys and 64-wide heads each product is then 32x128x64, which OpenBLAS runs
// with its small-matrix kernel (no packing): 32 rows took 1.69-1.74 ms CPU for BM_Attention
// against 2.05-2.07 ms for whole 128-row heads (packed) and 1.71-1.73 ms for 64 rows.
int64_t block_rows(int64_t m, int64_t n) {
  return std::min(std::clamp<int64_t>(4096 / std::max<int64_t>(n, 1), 16, 64),
                  std::max<int64_t>(m, 1));
}

}  // namespace

void attention(const AttentionDims& d, const float* q, const float* k, const float* v,
               const float* scale, const float* mask, float* out, const uint8_t* cond, float fill) {
  if (d.batch == 0 || d.m == 0 || d.dv == 0) return;
  if (d.n == 0) {  // softmax over no keys, then a product over no terms: zeros
    std::fill(out, out + d.batch * d.m * d.dv, 0.0f);
    return;
  }
  const int64_t mb = block_rows(d.m, d.n);
  const int64_t blocks = (d.m + mb - 1) / mb;
  const float s = scale ? *scale : 1.0f;
  auto body = [&](int64_t lo, int64_t hi) {
    // One block's scores per chunk of tasks (not thread_local: a dlopen'ed plugin's dynamic
    // TLS is not scanned by LeakSanitizer, which then reports it at exit).
    const auto tile = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(mb * d.n));
    float* S = tile.get();
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t b = t / blocks, i0 = (t % blocks) * mb, rows = std::min(mb, d.m - i0);
      const float* qb = q + (b * d.m + i0) * d.d;
      const float* kb = k + b * d.d * d.n;
      const float* vb = v + b * d.n * d.dv;
      if (d.d == 0)
        std::fill(S, S + rows * d.n, 0.0f);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, d.trans_k ? CblasTrans : CblasNoTrans, rows, d.n,
                    d.d, 1.0f, qb, d.d, kb, d.trans_k ? d.d : d.n, 0.0f, S, d.n);
      // The batch entry's offset into a value broadcast to the scores.
      auto at_batch = [&](const std::vector<int64_t>& stride) {
        int64_t off = 0, rest = b;
        for (size_t x = d.lead.size(); x-- > 0;) {
          off += (rest % d.lead[x]) * stride[x];
          rest /= d.lead[x];
        }
        return off;
      };
      const float* mrow = mask ? mask + at_batch(d.mask_stride) + i0 * d.mask_si : nullptr;
      const uint8_t* crow = cond ? cond + at_batch(d.cond_stride) + i0 * d.cond_si : nullptr;
      for (int64_t r = 0; r < rows; ++r) {
        float* row = S + r * d.n;
        if (scale && d.scale_divides)
          for (int64_t j = 0; j < d.n; ++j) row[j] = row[j] / s;
        else if (scale)
          for (int64_t j = 0; j < d.n; ++j) row[j] = row[j] * s;
        if (crow) {
          const uint8_t* cr = crow + r * d.cond_si;
          for (int64_t j = 0; j < d.n; ++j) row[j] = cr[j * d.cond_sj] ? row[j] : fill;
        }
        if (mrow) {
          const float* mr = mrow + r * d.mask_si;
          if (d.mask_sj == 1)
            for (int64_t j = 0; j < d.n; ++j) row[j] = row[j] + mr[j];
          else
            for (int64_t j = 0; j < d.n; ++j) row[j] = row[j] + mr[j * d.mask_sj];
        }
        softmax_contiguous_row(row, row, d.n);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, d.trans_v ? CblasTrans : CblasNoTrans, rows, d.dv,
                  d.n, 1.0f, S, d.n, vb, d.trans_v ? d.n : d.dv, 0.0f, out + (b * d.m + i0) * d.dv,
                  d.dv);
    }
  };
  SerialBlasScope serial;  // one single-threaded OpenBLAS call per TBB task
  parallel_for(d.batch * blocks, mb * d.n * (d.d + d.dv), body);
}

}  // namespace lt::host
