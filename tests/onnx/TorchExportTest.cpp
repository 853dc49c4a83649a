// TorchExportTest.cpp — a model exported by PyTorch itself (torch.onnx.export, opset 17, a
// symbolic batch axis; tests/onnx/torch_export/export_mlp.py wrote it with the exporter's own
// outputs): on every backend it matches those outputs at batch sizes 1, 8 and 32, and on
// cpu_jit the three batch sizes take at most 2 compiles (the symbolic axis is dynamic).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lazytensor/onnx.hpp"
#include "test_support.hpp"

namespace {

const std::string kDir = LT_TORCH_EXPORT_DIR;

TEST(TorchExport, MlpMatchesTheExporterAtThreeBatchSizes) {
  for (const std::string& backend : lt::test::built_backends()) {
    SCOPED_TRACE(backend);
    lt::Runtime rt = lt::Runtime::create();
    lt::Device dev = rt.find_device(backend);
    auto m = lt::onnx::Model::load(dev, kDir + "/mlp.onnx");
    ASSERT_EQ(m.inputs().size(), 1u);
    EXPECT_EQ(m.inputs()[0].dims, (std::vector<int64_t>{-1, 16}));  // the symbolic batch axis
    const double tol = backend == "tpu_sim" ? 3e-2 : 1e-5;  // tpu_sim's MXU multiplies in bf16
    for (int64_t n : {1, 8, 32}) {
      const std::string b = std::to_string(n);
      lt::Tensor x = lt::onnx::read_tensor(dev, kDir + "/x_" + b + ".npy");
      std::vector<float> want =
          lt::onnx::read_tensor(dev, kDir + "/y_" + b + ".npy").to_vector<float>();
      lt::Tensor y = m.run({{"x", x}})[0];
      ASSERT_EQ(y.shape(), (std::vector<int64_t>{n, 10}));
      std::vector<float> got = y.to_vector<float>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tol) << "batch " << n << " at " << i;
    }
    if (backend == "cpu_jit") EXPECT_LE(rt.metric("compiles"), 2.0);
  }
}

}  // namespace
