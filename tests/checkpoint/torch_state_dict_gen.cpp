// torch_state_dict_gen.cpp — writes, without LazyTensor, the safetensors file PyTorch writes for
//   model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.ReLU(),
//                               torch.nn.Linear(4, 2))
//   safetensors.torch.save_file(model.state_dict(), path, metadata={...})
// with the parameter values below: PyTorch's names ("0.weight", "1.bias", ...), its layout
// (Linear weight [out, in]), its file layout (header keys sorted, "__metadata__" with
// "format": "pt", the header padded with spaces to 8 bytes, data in name order). It also
// computes the model's output for a fixed input by PyTorch's definitions (x W^T + b; LayerNorm
// with biased variance, eps 1e-5) in double and stores input and output in the metadata, so
// CheckpointTest can check lt::load_state_dict against an answer it did not compute.
// Usage: torch_state_dict_gen OUT.safetensors
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Param {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Deterministic, sign-mixed values that are exact in f32.
std::vector<float> values(size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 7 + salt * 13) % 17) - 8) / 16.0f;
  return v;
}

std::string json_floats(const std::vector<double>& v) {
  std::string s = "[";
  char buf[40];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.17g", i ? "," : "", v[i]);
    s += buf;
  }
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  std::map<std::string, Param> p;  // std::map: PyTorch's header and data order (sorted names)
  p["0.weight"] = {{4, 3}, values(12, 1)};
  p["0.bias"] = {{4}, values(4, 2)};
  p["1.weight"] = {{4}, {1.0f, 0.5f, 2.0f, -1.0f}};
  p["1.bias"] = {{4}, {0.25f, -0.5f, 0.0f, 1.0f}};
  p["3.weight"] = {{2, 4}, values(8, 3)};
  p["3.bias"] = {{2}, {0.5f, -0.25f}};

  // The forward pass, PyTorch's way, for x [2, 3].
  const std::vector<double> x = {1.0, -2.0, 0.5, 3.0, 0.25, -1.0};
  std::vector<double> y;
  for (int r = 0; r < 2; ++r) {
    double h[4], mean = 0, var = 0;
    for (int o = 0; o < 4; ++o) {
      h[o] = p["0.bias"].values[o];
      for (int i = 0; i < 3; ++i) h[o] += x[r * 3 + i] * p["0.weight"].values[o * 3 + i];
      mean += h[o] / 4;
    }
    for (int o = 0; o < 4; ++o) var += (h[o] - mean) * (h[o] - mean) / 4;
    for (int o = 0; o < 4; ++o) {
      h[o] =
          (h[o] - mean) / std::sqrt(var + 1e-5) * p["1.weight"].values[o] + p["1.bias"].values[o];
      h[o] = h[o] > 0 ? h[o] : 0;
    }
    for (int o = 0; o < 2; ++o) {
      double v = p["3.bias"].values[o];
      for (int i = 0; i < 4; ++i) v += h[i] * p["3.weight"].values[o * 4 + i];
      y.push_back(v);
    }
  }

  // Metadata values are strings; the arrays go in as JSON text, escaped.
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\\\"") : std::string(1, c);
    return q + "\"";
  };
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"input\":" + quoted(json_floats(x)) +
                       ",\"output\":" + quoted(json_floats(y)) + "}";
  std::string data;
  for (const auto& [name, t] : p) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
    header += ",\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    header +=
        "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::FILE* f = std::fopen(argv[1], "wb");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little endian
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(header.data(), 1, n, f) == n &&
            std::fwrite(data.data(), 1, data.size(), f) == data.size();
  ok = std::fclose(f) == 0 && ok;
  return ok ? 0 : 1;
}
