// make_seeds.cpp — writes the seed models of the ONNX loader's fuzz harness (tests/fuzz/corpus/
// onnx) with onnx_writer.hpp: lt_onnx_make_seeds <dir>.
#include <cstdio>
#include <string>
#include <vector>

#include "onnx_writer.hpp"

using namespace lt::onnx_test;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: lt_onnx_make_seeds <dir>\n");
    return 2;
  }
  std::string dir = argv[1];
  write_file(dir + "/mlp.onnx", mlp(3, 4, 2, std::vector<float>(12, 0.5f), {0, 1, 2, 3},
                                    std::vector<float>(8, -0.25f), {1, 2})
                                    .encode());
  Graph conv;
  conv.nodes = {node("Conv", {"x", "w"}, {"c"}, "conv",
                     {Attr::Ints("pads", {1, 1, 1, 1}), Attr::Ints("strides", {1, 1})}),
                node("MaxPool", {"c"}, {"p"}, "pool", {Attr::Ints("kernel_shape", {2, 2})}),
                node("Shape", {"p"}, {"s"}, "shape"),
                node("Reshape", {"p", "s"}, {"y"}, "reshape")};
  conv.initializers = {tensor_f32("w", {2, 1, 3, 3}, std::vector<float>(18, 0.1f))};
  conv.inputs = {value_info("x", 1, {1, 1, 4, 4})};
  conv.outputs = {value_info("y", 1, {1, 2, 2, 2})};
  write_file(dir + "/conv.onnx", conv.encode());
  Graph red;
  red.nodes = {node("ReduceSum", {"x", "axes"}, {"r"}, "sum", {Attr::Int("keepdims", 0)}),
               node("Softmax", {"r"}, {"y"}, "softmax", {Attr::Int("axis", -1)})};
  red.initializers = {tensor_i64("axes", {1}, {1})};
  red.inputs = {value_info("x", 1, {2, 3, 4})};
  red.outputs = {value_info("y", 1, {2, 4})};
  write_file(dir + "/reduce.onnx", red.encode());
  return 0;
}
