// ops/linalg.cpp — ONNX contractions and linear algebra: MatMul, Gemm, Einsum, Det, ...
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

namespace {

// Einsum by broadcasting products and sums; a letter repeated in one operand (a diagonal)
// becomes two letters tied by an identity mask.
Vals op_einsum(Ctx& c, const NodeP&, Vals& in) {
  std::string eq = c.attr_s("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  size_t p = 0;
  while (true) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != in.size())
    c.error("equation has " + std::to_string(terms.size()) + " operands");
  for (char ch : eq) {
    if (!std::isalpha(static_cast<unsigned char>(ch)) && ch != ',' && ch != '-' && ch != '>' &&
        ch != '.') {
      c.error(std::string("equation has the character '") + ch + "'");
    }
  }
  if (eq.find("...") != std::string::npos) {
    // Ellipsis: expand to letters A, B, ... for the broadcast dims.
    size_t maxr = 0;
    for (size_t i = 0; i < terms.size(); ++i) {
      size_t e = terms[i].find("...");
      if (e == std::string::npos) continue;
      size_t rank = c.T(in[i]).rank(), named = terms[i].size() - 3;
      if (rank < named || rank - named > 20) {
        c.error("operand " + std::to_string(i) + " of rank " + std::to_string(rank) +
                " does not fit '" + terms[i] + "'");
      }
      maxr = std::max(maxr, rank - named);
    }
    auto expand = [&](std::string t, size_t r) {
      size_t e = t.find("...");
      if (e == std::string::npos) return t;
      std::string letters;
      for (size_t k = maxr - r; k < maxr; ++k) letters += static_cast<char>('A' + k);
      return t.substr(0, e) + letters + t.substr(e + 3);
    };
    for (size_t i = 0; i < terms.size(); ++i) {
      if (terms[i].find("...") == std::string::npos) continue;
      terms[i] = expand(terms[i], c.T(in[i]).rank() - (terms[i].size() - 3));
    }
    if (arrow != std::string::npos) {
      std::string rhs = eq.substr(arrow + 2);
      std::string letters;
      for (size_t k = 0; k < maxr; ++k) letters += static_cast<char>('A' + k);
      size_t e = rhs.find("...");
      if (e != std::string::npos) rhs = rhs.substr(0, e) + letters + rhs.substr(e + 3);
      eq = lhs + "->" + rhs;
    } else {
      eq = lhs;
    }
  }
  std::string out_t;
  if (arrow != std::string::npos) {
    out_t = eq.substr(eq.find("->") + 2);
  } else {
    std::map<char, int> cnt;
    for (auto& t : terms)
      for (char ch : t) cnt[ch]++;
    for (char ch = 'A'; ch <= 'Z'; ++ch)
      if (cnt.count(ch)) out_t += ch;
    for (auto& [ch, k] : cnt)
      if (k == 1 && ch >= 'a') out_t += ch;
  }
  std::map<char, int64_t> size;
  std::string all;
  std::vector<Tensor> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    Tensor x = c.T(in[i]);
    if (!is_float(x.dtype())) x = x.cast(LT_DTYPE_F64);
    std::string t = terms[i];
    if (t.size() != x.rank())
      c.error("operand " + std::to_string(i) + " rank does not match '" + t + "'");
    auto s = x.shape();
    // Diagonals: a repeated letter is renamed and tied by an eye mask.
    for (size_t a = 0; a < t.size(); ++a) {
      for (size_t b = a + 1; b < t.size(); ++b) {
        if (t[a] != t[b]) continue;
        char fresh = 0;
        for (char ch = 'z'; ch > 'A'; --ch) {
          if (eq.find(ch) == std::string::npos && all.find(ch) == std::string::npos &&
              t.find(ch) == std::string::npos) {
            fresh = ch;
            break;
          }
        }
        t[b] = fresh;
        std::vector<int64_t> es(t.size(), 1);
        es[a] = s[a];
        es[b] = s[b];
        std::vector<int64_t> ra(t.size(), 1), rb(t.size(), 1);
        ra[a] = s[a];
        rb[b] = s[b];
        Tensor ia = lt::arange(c.dev, 0, double(s[a]), 1, LT_DTYPE_I64).reshape(ra);
        Tensor ib = lt::arange(c.dev, 0, double(s[b]), 1, LT_DTYPE_I64).reshape(rb);
        x = (x * (ia == ib).cast(x.dtype())).sum({static_cast<int64_t>(b)}, true);
        s[b] = 1;
        std::string t2 = t;
        t2[b] = '#';
        t = t2;
      }
    }
    // Drop the summed-away diagonal placeholders.
    std::string t3;
    std::vector<int64_t> s3;
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] == '#') continue;
      t3 += t[k];
      s3.push_back(s[k]);
    }
    x = x.reshape(s3);
    for (size_t k = 0; k < t3.size(); ++k) {
      if (!size.count(t3[k]) || size[t3[k]] == 1) size[t3[k]] = s3[k];
      if (all.find(t3[k]) == std::string::npos) all += t3[k];
    }
    terms[i] = t3;
    ops.push_back(x);
  }
  // Align every operand to `all` and multiply.
  Tensor prod;
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string t = terms[i];
    std::vector<int64_t> perm;
    std::string present;
    for (char ch : all) {
      size_t k = t.find(ch);
      if (k != std::string::npos) {
        perm.push_back(static_cast<int64_t>(k));
        present += ch;
      }
    }
    Tensor x = ops[i].permute(perm);
    std::vector<int64_t> rs;
    auto xs = x.shape();
    size_t j = 0;
    for (char ch : all) rs.push_back(present.find(ch) != std::string::npos ? xs[j++] : 1);
    x = x.reshape(rs);
    prod = prod.defined() ? prod * x : x;
  }
  std::vector<int64_t> sum_axes;
  std::string kept;
  for (size_t k = 0; k < all.size(); ++k) {
    if (out_t.find(all[k]) == std::string::npos)
      sum_axes.push_back(static_cast<int64_t>(k));
    else
      kept += all[k];
  }
  auto ps = prod.shape();
  std::vector<int64_t> full_s;
  for (char ch : all) full_s.push_back(size[ch]);
  if (ps != full_s) prod = prod.broadcast_to(full_s);
  if (!sum_axes.empty()) prod = prod.sum(sum_axes, false);
  std::vector<int64_t> perm;
  for (char ch : out_t) perm.push_back(static_cast<int64_t>(kept.find(ch)));
  if (!perm.empty()) prod = prod.permute(perm);
  Tensor x0 = c.T(in[0]);
  return one(c, cast_to(prod, x0.dtype()), in[0].ot);
}

}  // namespace

void add_linalg_ops(std::map<std::string, OpEntry>& t) {
  // Contractions.
  t["MatMul"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                   (void)n;
                   Tensor a = c.T(in.at(0)), b = c.T(in.at(1));
                   DType dt = a.dtype();
                   bool f = is_float(dt);
                   Tensor x = f ? a : a.cast(LT_DTYPE_F64), y = f ? b : b.cast(LT_DTYPE_F64);
                   auto as = x.shape(), bs = y.shape();
                   bool a1 = as.size() == 1, b1 = bs.size() == 1;
                   if (a1) x = x.reshape({1, as[0]});
                   if (b1) y = y.reshape({bs[0], 1});
                   // Broadcast batch dims explicitly.
                   auto xs = x.shape(), ys = y.shape();
                   if (xs.size() > 2 || ys.size() > 2) {
                     std::vector<int64_t> xb(xs.begin(), xs.end() - 2),
                         yb(ys.begin(), ys.end() - 2);
                     auto bb = bcast_shape(c, xb, yb);
                     auto xt = bb, yt = bb;
                     xt.push_back(xs[xs.size() - 2]);
                     xt.push_back(xs.back());
                     yt.push_back(ys[ys.size() - 2]);
                     yt.push_back(ys.back());
                     if (xs != xt) x = x.broadcast_to(xt);
                     if (ys != yt) y = y.broadcast_to(yt);
                   }
                   Tensor z = x.matmul(y);
                   auto zs = z.shape();
                   if (a1 || b1) {
                     std::vector<int64_t> o(zs.begin(), zs.end() - 2);
                     if (!a1) o.push_back(zs[zs.size() - 2]);
                     if (!b1) o.push_back(zs.back());
                     z = z.reshape(o);
                   }
                   return one(c, cast_to(z, dt), in[0].ot);
                 },
                 1};
  t["Gemm"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                 (void)n;
                 Tensor a = c.T(in.at(0)), b = c.T(in.at(1));
                 DType dt = a.dtype();
                 bool f = is_float(dt);
                 if (!f) {
                   a = a.cast(LT_DTYPE_F64);
                   b = b.cast(LT_DTYPE_F64);
                 }
                 if (c.attr_i("transA", 0)) a = a.t();
                 if (c.attr_i("transB", 0)) b = b.t();
                 double alpha = c.attr_f("alpha", 1.0f), beta = c.attr_f("beta", 1.0f);
                 Tensor y = a.matmul(b);
                 if (alpha != 1.0) y = y * sc(c, y, alpha);
                 if (in.size() > 2 && in[2].present) {
                   Tensor cc = cast_to(c.T(in[2]), y.dtype());
                   y = y + (beta != 1.0 ? cc * sc(c, cc, beta) : cc);
                 }
                 return one(c, cast_to(y, dt), in[0].ot);
               },
               1};
  t["Einsum"] = {op_einsum, 12};
  t["MatMulInteger"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                          (void)n;
                          Tensor a = c.T(in.at(0)).cast(LT_DTYPE_F64),
                                 b = c.T(in.at(1)).cast(LT_DTYPE_F64);
                          if (in.size() > 2 && in[2].present) {
                            Tensor za = c.T(in[2]).cast(LT_DTYPE_F64);
                            if (za.rank() == 1 && a.rank() >= 2 && za.shape()[0] > 1)
                              za = za.reshape({za.shape()[0], 1});
                            a = a - za;
                          }
                          if (in.size() > 3 && in[3].present) b = b - c.T(in[3]).cast(LT_DTYPE_F64);
                          return one(c, a.matmul(b).cast(LT_DTYPE_I32), kInt32);
                        },
                        10};

  t["Det"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Leibniz formula over permutations (n <= 6): sums of products of lazy slices.
        Tensor x = c.T(in.at(0));
        need_rank(c, x, 2, 64, "input");
        auto s = x.shape();
        int64_t r = static_cast<int64_t>(s.size()), N = s[r - 1];
        if (N > 6) c.error("Det of matrices larger than 6x6 is not supported");
        std::vector<int64_t> perm(N);
        std::iota(perm.begin(), perm.end(), 0);
        std::vector<int64_t> batch(s.begin(), s.end() - 2);
        Tensor acc;
        do {
          int inv = 0;
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = i + 1; j < N; ++j) inv += perm[i] > perm[j];
          Tensor term;
          for (int64_t i = 0; i < N; ++i) {
            Tensor e =
                slice1(slice1(x, r - 2, i, i + 1), r - 1, perm[i], perm[i] + 1).reshape(batch);
            term = term.defined() ? term * e : e;
          }
          if (inv % 2) term = -term;
          acc = acc.defined() ? acc + term : term;
        } while (std::next_permutation(perm.begin(), perm.end()));
        return one(c, acc, in[0].ot);
      },
      11};
}

}  // namespace lt::onnx::detail
