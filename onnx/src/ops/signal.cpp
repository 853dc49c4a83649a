// ops/signal.cpp — ONNX signal and feature ops: Hann/Hamming/Blackman windows, DFT, STFT, TfIdf.
#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

namespace lt::onnx::detail {

void add_signal_ops(std::map<std::string, OpEntry>& t) {
  auto window_fn = [](int kind) {
    return OpEntry{[kind](Ctx& c, const NodeP&, Vals& in) -> Vals {
                     int64_t N = c.ints(in.at(0)).at(0);
                     int32_t ot = static_cast<int32_t>(c.attr_i("output_datatype", kFloat));
                     bool periodic = c.attr_i("periodic", 1) != 0;
                     double denom = periodic ? double(N) : double(N - 1);
                     Tensor k = lt::arange(c.dev, 0, double(N), 1, LT_DTYPE_F64);
                     Tensor a = k * c.scalar(2 * M_PI / denom, LT_DTYPE_F64);
                     Tensor y;
                     if (kind == 0)
                       y = c.scalar(0.5, LT_DTYPE_F64) - a.cos() * c.scalar(0.5, LT_DTYPE_F64);
                     else if (kind == 1)
                       y = c.scalar(25.0 / 46, LT_DTYPE_F64) -
                           a.cos() * c.scalar(21.0 / 46, LT_DTYPE_F64);
                     else
                       y = c.scalar(0.42, LT_DTYPE_F64) - a.cos() * c.scalar(0.5, LT_DTYPE_F64) +
                           (a * c.scalar(2, LT_DTYPE_F64)).cos() * c.scalar(0.08, LT_DTYPE_F64);
                     return one(c, y.cast(carrier_dtype(ot)), ot);
                   },
                   17};
  };
  t["HannWindow"] = window_fn(0);
  t["HammingWindow"] = window_fn(1);
  t["BlackmanWindow"] = window_fn(2);
  t["DFT"] = {[](Ctx& c, const NodeP& n, Vals& in) -> Vals {
                (void)n;
                // A matmul with cos/sin tables that depend on the length only.
                Tensor x = c.T(in.at(0));
                need_rank(c, x, 2, 64, "input");
                auto s = x.shape();
                int64_t r = static_cast<int64_t>(s.size());
                int64_t axis = norm_axis(c, c.attr_i("axis", 1), r - 1);
                bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
                int64_t N = s[axis];
                int64_t L = N;
                if (in.size() > 1 && in[1].present) L = c.ints(in[1]).at(0);
                Tensor re = slice1(x, r - 1, 0, 1), im;
                if (s.back() == 2) im = slice1(x, r - 1, 1, 2);
                // Move axis last: [..., N]
                std::vector<int64_t> sq(s.begin(), s.end() - 1);
                re = re.reshape(sq);
                if (im.defined()) im = im.reshape(sq);
                auto perm = perm_to_last(axis, r - 1);
                re = re.permute(perm);
                if (im.defined()) im = im.permute(perm);
                if (L != N) {
                  auto ps = re.shape();
                  if (L < N) {
                    re = slice1(re, r - 2, 0, L);
                    if (im.defined()) im = slice1(im, r - 2, 0, L);
                  } else {
                    std::vector<int64_t> bf(ps.size(), 0), af(ps.size(), 0);
                    af.back() = L - N;
                    re = re.pad(bf, af, 0.0);
                    if (im.defined()) im = im.pad(bf, af, 0.0);
                  }
                }
                int64_t K = onesided ? L / 2 + 1 : L;
                check_table(c, L);
                check_table(c, L * K);
                std::vector<double> cs(L * K), sn(L * K);
                double sign = inverse ? 1 : -1;
                for (int64_t j = 0; j < L; ++j)
                  for (int64_t k = 0; k < K; ++k) {
                    double a = 2 * M_PI * double((j * k) % L) / double(L);
                    cs[j * K + k] = std::cos(a);
                    sn[j * K + k] = sign * std::sin(a);
                  }
                DType dt = x.dtype();
                Tensor C = Tensor::from<double>(c.dev, cs, {L, K}).cast(dt),
                       S = Tensor::from<double>(c.dev, sn, {L, K}).cast(dt);
                Tensor ore = re.matmul(C), oim = re.matmul(S);
                if (im.defined()) {
                  ore = ore - im.matmul(S);
                  oim = oim + im.matmul(C);
                }
                if (inverse) {
                  ore = ore / sc(c, ore, double(L));
                  oim = oim / sc(c, oim, double(L));
                }
                auto inv = inverse_perm(perm);
                ore = ore.permute(inv);
                oim = oim.permute(inv);
                auto os = ore.shape();
                os.push_back(1);
                return one(c, lt::concat({ore.reshape(os), oim.reshape(os)}, r - 1), in[0].ot);
              },
              17};
  t["TfIdfVectorizer"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Each pool n-gram counted by comparing strided slices of the input (no host values).
        Tensor x = c.T(in.at(0)).cast(LT_DTYPE_I64);
        bool batched = x.rank() == 2;
        if (!batched) x = x.reshape({1, x.numel()});
        int64_t B = x.shape()[0], C = x.shape()[1];
        std::string mode = c.attr_s("mode", "TF");
        int64_t mn = c.attr_i("min_gram_length", 1), mx = c.attr_i("max_gram_length", 1);
        int64_t max_skip = c.attr_i("max_skip_count", 0);
        auto counts = c.attr_ints("ngram_counts"), indexes = c.attr_ints("ngram_indexes"),
             pool_ = c.attr_ints("pool_int64s");
        if (c.has_attr("pool_strings"))
          fail(LT_STATUS_UNSUPPORTED, "out of scope: pool_strings (string n-grams)");
        std::vector<float> weights =
            c.attr("weights") ? c.attr("weights")->floats : std::vector<float>{};
        int64_t num_out = 0;
        for (int64_t v : indexes) num_out = std::max(num_out, v + 1);
        std::vector<Tensor> cols(num_out);
        size_t gi = 0;
        for (size_t len_i = 0; len_i < counts.size(); ++len_i) {
          int64_t gl = static_cast<int64_t>(len_i) + 1;
          size_t begin = static_cast<size_t>(counts[len_i]);
          size_t end =
              len_i + 1 < counts.size() ? static_cast<size_t>(counts[len_i + 1]) : pool_.size();
          for (size_t p = begin; p + gl <= end; p += gl, ++gi) {
            if (gi >= indexes.size()) c.error("ngram_indexes is shorter than the pool");
            if (gl < mn || gl > mx) continue;
            Tensor total;
            int64_t skips = gl == 1 ? 0 : max_skip;
            for (int64_t k = 0; k <= skips; ++k) {
              int64_t span = (gl - 1) * (k + 1);
              if (span >= C) continue;
              Tensor match;
              for (int64_t j = 0; j < gl; ++j) {
                Tensor sl = slice1(x, 1, j * (k + 1), j * (k + 1) + C - span);
                Tensor e = sl == c.scalar(double(pool_[p + j]), LT_DTYPE_I64);
                match = match.defined() ? (match && e) : e;
              }
              Tensor cnt = match.cast(LT_DTYPE_F32).sum({1}, true);
              total = total.defined() ? total + cnt : cnt;
            }
            if (!total.defined()) continue;
            int64_t o = indexes[gi];
            double w = o < static_cast<int64_t>(weights.size()) ? weights[o] : 1.0;
            Tensor col = mode == "TF"    ? total
                         : mode == "IDF" ? (total > c.scalar(0, LT_DTYPE_F32)).cast(LT_DTYPE_F32) *
                                               c.scalar(w, LT_DTYPE_F32)
                                         : total * c.scalar(w, LT_DTYPE_F32);
            cols[o] = cols[o].defined() ? cols[o] + col : col;
          }
        }
        for (auto& col : cols) {
          if (!col.defined()) col = lt::zeros(c.dev, {B, 1}, LT_DTYPE_F32);
        }
        Tensor y = num_out ? lt::concat(cols, 1) : lt::zeros(c.dev, {B, 0}, LT_DTYPE_F32);
        if (!batched) y = y.reshape({num_out});
        return one(c, y, kFloat);
      },
      9};

  t["STFT"] = {
      [](Ctx& c, const NodeP& n, Vals& in) -> Vals {
        (void)n;
        // Frames as strided slices, the window as a product, each frame's DFT as a matmul with
        // cos/sin tables that depend on the frame length only.
        Tensor x = c.T(in.at(0));
        need_rank(c, x, 3, 3, "input");
        auto s = x.shape();  // [B, L, 1 or 2]
        int64_t step = c.ints(in.at(1)).at(0);
        Tensor win = in.size() > 2 && in[2].present ? c.T(in[2]) : Tensor();
        int64_t len = in.size() > 3 && in[3].present ? c.ints(in[3]).at(0)
                                                     : (win.defined() ? win.shape()[0] : s[1]);
        bool onesided = c.attr_i("onesided", 1) != 0;
        if (step <= 0 || len <= 0 || len > s[1])
          c.error("frame_step and frame_length do not fit the signal");
        int64_t B = s[0], F = (s[1] - len) / step + 1, K = onesided ? len / 2 + 1 : len;
        check_table(c, len * K);
        std::vector<Tensor> frames;
        for (int64_t f = 0; f < F; ++f)
          frames.push_back(slice1(x, 1, f * step, f * step + len).reshape({B, 1, len, s[2]}));
        Tensor fr = lt::concat(frames, 1);  // [B, F, len, c]
        Tensor re = slice1(fr, 3, 0, 1).reshape({B, F, len}), im;
        if (s[2] == 2) im = slice1(fr, 3, 1, 2).reshape({B, F, len});
        if (win.defined()) {
          Tensor w = cast_to(win, re.dtype());
          re = re * w;
          if (im.defined()) im = im * w;
        }
        std::vector<double> cs(len * K), sn(len * K);
        for (int64_t j = 0; j < len; ++j)
          for (int64_t k = 0; k < K; ++k) {
            double a = 2 * M_PI * double((j * k) % len) / double(len);
            cs[j * K + k] = std::cos(a);
            sn[j * K + k] = -std::sin(a);
          }
        DType dt = re.dtype();
        Tensor C = Tensor::from<double>(c.dev, cs, {len, K}).cast(dt);
        Tensor S = Tensor::from<double>(c.dev, sn, {len, K}).cast(dt);
        Tensor ore = re.matmul(C), oim = re.matmul(S);
        if (im.defined()) {
          ore = ore - im.matmul(S);
          oim = oim + im.matmul(C);
        }
        return one(c, lt::concat({ore.reshape({B, F, K, 1}), oim.reshape({B, F, K, 1})}, 3),
                   in[0].ot);
      },
      17};
}

}  // namespace lt::onnx::detail
