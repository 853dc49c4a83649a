// The gpu_opencl backend on the plugin kit: buffers as cl_mem (lt_plugin_buffer::handle),
// executables as one built program + kernel launches. The kit owns the C ABI: argument checks,
// graph validation and the conversion of every exception into an lt_plugin_error.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cl_runtime.hpp"
#include "codegen.hpp"

namespace lt::ocl {
namespace {

cl_mem mem_of(const kit::Buffer* b) {
  return static_cast<cl_mem>(b->handle);
}

cl_mem create_buffer(const Device& dev, size_t nbytes) {
  cl_int e = CL_SUCCESS;
  // OpenCL refuses zero-sized buffers; empty tensors still get a handle.
  cl_mem m = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE, nbytes ? nbytes : 1, nullptr, &e);
  if (e == CL_INVALID_BUFFER_SIZE)
    fail(LT_STATUS_OUT_OF_MEMORY,
         "buffer of " + std::to_string(nbytes) + " bytes exceeds the device's maximum allocation");
  check(e, "clCreateBuffer");
  return m;
}

class OclExecutable : public kit::Executable {
 public:
  OclExecutable(Device& dev, const lt_graph& g, GeneratedProgram gen)
      : dev_(dev),
        gen_(std::move(gen)),
        inputs_(g.inputs, g.inputs + g.num_inputs),
        outputs_(g.outputs, g.outputs + g.num_outputs),
        temps_(g.num_nodes, nullptr) {
    for (size_t i = 0; i < g.num_nodes; ++i)
      bytes_.push_back(static_cast<size_t>(lower::DescRef(g.nodes[i]).numel()) *
                       lt_dtype_size(g.nodes[i].dtype));
  }
  // Separate from the constructor so that the destructor releases what a failure leaves.
  void build() {
    program_ = dev_.program(gen_.source);
    gen_.source.clear();
    for (size_t k = 0; k < gen_.distinct_kernels; ++k) {
      cl_int e = CL_SUCCESS;
      kernels_.push_back(clCreateKernel(program_, ("k" + std::to_string(k)).c_str(), &e));
      check(e, "clCreateKernel");
    }
  }
  ~OclExecutable() override {
    for (cl_kernel k : kernels_)
      if (k) clReleaseKernel(k);
    for (cl_mem m : temps_)
      if (m) clReleaseMemObject(m);
    if (program_) clReleaseProgram(program_);
  }

  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out) override {
    // clSetKernelArg on a shared kernel is not thread-safe, and temporaries are shared.
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<cl_mem> mem(bytes_.size(), nullptr);
    for (size_t k = 0; k < in.size(); ++k) mem[inputs_[k]] = mem_of(in[k]);
    for (size_t k = 0; k < out.size(); ++k)
      if (!mem[outputs_[k]]) mem[outputs_[k]] = mem_of(out[k]);
    for (int32_t n : gen_.stored) {
      if (mem[n]) continue;
      if (!temps_[n]) temps_[n] = create_buffer(dev_, bytes_[n]);
      mem[n] = temps_[n];
    }
    cl_command_queue q = dev_.queue();
    for (size_t i = 0; i < gen_.kernels.size(); ++i) {
      const KernelLaunch& l = gen_.kernels[i];
      for (size_t a = 0; a < l.args.size(); ++a)
        check(clSetKernelArg(kernels_[l.kernel], static_cast<cl_uint>(a), sizeof(cl_mem),
                             &mem[l.args[a]]),
              "clSetKernelArg");
      check(clEnqueueNDRangeKernel(q, kernels_[l.kernel], l.dims, nullptr, l.global,
                                   l.local[0] ? l.local : nullptr, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel(k" + std::to_string(l.kernel) + ")");
    }
    // Outputs that are graph inputs, or that repeat a node, are copies.
    for (size_t k = 0; k < out.size(); ++k) {
      cl_mem src = mem[outputs_[k]];
      if (src != mem_of(out[k]) && bytes_[outputs_[k]] > 0)
        check(clEnqueueCopyBuffer(q, src, mem_of(out[k]), 0, 0, bytes_[outputs_[k]], 0, nullptr,
                                  nullptr),
              "clEnqueueCopyBuffer");
    }
    check(clFinish(q), "clFinish (kernel execution)");
  }

  void stats(const kit::Stats& emit) const override {
    emit("kernels", static_cast<double>(gen_.kernels.size()));
    emit("distinct_kernels", static_cast<double>(gen_.distinct_kernels));
    emit("fusion_groups", static_cast<double>(gen_.groups));
    emit("split_groups", static_cast<double>(gen_.split_groups));
  }

 private:
  Device& dev_;
  GeneratedProgram gen_;
  cl_program program_ = nullptr;
  std::vector<cl_kernel> kernels_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<size_t> bytes_;  // of each node's value
  std::mutex mutex_;           // guards kernel arguments and temps_
  std::vector<cl_mem> temps_;  // per node; allocated on first run, kept for reuse
};

class OpenclBackend : public kit::Backend {
 public:
  explicit OpenclBackend(kit::Context& ctx)
      : Backend(ctx), log_(ctx.log), dev_(Device::create(ctx.options, ctx.log)) {
    caps_.fp64 = dev_->fp64;
    caps_.cpu = dev_->info.kind == "cpu";
    caps_.max_wg = dev_->max_work_group;
    caps_.vec_width = dev_->native_float_width;
  }

  std::vector<kit::Device> devices() const override { return {dev_->info}; }

  kit::Buffer* alloc(size_t device, size_t nbytes) override {
    auto b = std::make_unique<kit::Buffer>();
    b->handle = create_buffer(*dev_, nbytes);
    b->nbytes = b->capacity = nbytes;
    b->device = device;
    return b.release();
  }
  void free(kit::Buffer* b) noexcept override {
    if (b->handle) clReleaseMemObject(mem_of(b));
    delete b;
  }
  void upload(kit::Buffer* b, size_t offset, const void* src, size_t n) override {
    check(clEnqueueWriteBuffer(dev_->queue(), mem_of(b), CL_TRUE, offset, n, src, 0, nullptr,
                               nullptr),
          "clEnqueueWriteBuffer");
  }
  void download(const kit::Buffer* b, size_t offset, void* dst, size_t n) override {
    check(
        clEnqueueReadBuffer(dev_->queue(), mem_of(b), CL_TRUE, offset, n, dst, 0, nullptr, nullptr),
        "clEnqueueReadBuffer");
  }
  void* host_ptr(kit::Buffer*) override { return nullptr; }

  bool supports(const lt_graph& g, size_t node, size_t) override {
    return node_supported(g, node, caps_);
  }

  std::unique_ptr<kit::Executable> compile(const lt_graph& g, size_t) override {
    for (size_t i = 0; i < g.num_nodes; ++i)
      if (!node_supported(g, i, caps_))
        fail(LT_STATUS_UNSUPPORTED, "cannot compile node " + std::to_string(i) + " (" +
                                        g.nodes[i].op + ", " + lt_dtype_name(g.nodes[i].dtype) +
                                        ")");
    GeneratedProgram gen = generate(g, caps_);
    if (g.num_nodes <= 4096) log_(0, "gpu_opencl: generated program:\n" + gen.source);
    auto exe = std::make_unique<OclExecutable>(*dev_, g, std::move(gen));
    exe->build();
    ++executables_;
    return exe;
  }

  void stats(const kit::Stats& emit) const override {
    dev_->stats(emit);
    emit("executables", static_cast<double>(executables_.load()));
  }

 private:
  kit::Log log_;
  std::unique_ptr<Device> dev_;
  DeviceCaps caps_;
  std::atomic<uint64_t> executables_{0};
};

}  // namespace
}  // namespace lt::ocl

LT_KIT_PLUGIN(lt::ocl::OpenclBackend, "gpu_opencl", "0.2.0")
