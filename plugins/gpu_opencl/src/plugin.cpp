// The gpu_opencl backend on the plugin kit: buffers as cl_mem (lt_plugin_buffer::handle),
// executables as one built program + kernel launches. The kit owns the C ABI: argument checks,
// graph validation and the conversion of every exception into an lt_plugin_error.
#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <functional>
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
        bytes_(lower::value_bytes(g)),
        temps_(g.num_nodes, nullptr),
        temp_bytes_(g.num_nodes, 0) {}
  const GeneratedProgram& generated() const { return gen_; }
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
    run(in, out, gen_.kernels, bytes_, {});
  }
  // With the launches and node sizes of one size and each kernel's size arguments (`long`s
  // after its buffers) when the program is a dynamic graph's.
  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out,
           const std::vector<KernelLaunch>& launches, const std::vector<size_t>& bytes,
           const std::vector<std::vector<int64_t>>& sizes) {
    // clSetKernelArg on a shared kernel is not thread-safe, and temporaries are shared.
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<cl_mem> mem(bytes.size(), nullptr);
    for (size_t k = 0; k < in.size(); ++k) mem[inputs_[k]] = mem_of(in[k]);
    for (size_t k = 0; k < out.size(); ++k)
      if (!mem[outputs_[k]]) mem[outputs_[k]] = mem_of(out[k]);
    for (int32_t n : gen_.stored) {
      if (mem[n]) continue;
      if (temps_[n] && temp_bytes_[n] < bytes[n]) clReleaseMemObject(temps_[n]), temps_[n] = {};
      if (!temps_[n]) temps_[n] = create_buffer(dev_, temp_bytes_[n] = bytes[n]);
      mem[n] = temps_[n];
    }
    cl_command_queue q = dev_.queue();
    for (size_t i = 0; i < launches.size(); ++i) {
      const KernelLaunch& l = launches[i];
      auto span = kit::current_spans().time("k" + std::to_string(l.kernel), [q] { clFinish(q); });
      for (size_t a = 0; a < l.args.size(); ++a)
        check(clSetKernelArg(kernels_[l.kernel], static_cast<cl_uint>(a), sizeof(cl_mem),
                             &mem[l.args[a]]),
              "clSetKernelArg");
      // A dynamic program's size arguments (`long`s after the buffers) are per kernel:
      // launches sharing a kernel share its text, numbers included, at every size.
      for (size_t a = 0; l.kernel < sizes.size() && a < sizes[l.kernel].size(); ++a)
        check(clSetKernelArg(kernels_[l.kernel], static_cast<cl_uint>(l.args.size() + a),
                             sizeof(cl_long), &sizes[l.kernel][a]),
              "clSetKernelArg");
      check(clEnqueueNDRangeKernel(q, kernels_[l.kernel], l.dims, nullptr, l.global,
                                   l.local[0] ? l.local : nullptr, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel(k" + std::to_string(l.kernel) + ")");
    }
    // Outputs that are graph inputs, or that repeat a node, are copies.
    for (size_t k = 0; k < out.size(); ++k) {
      cl_mem src = mem[outputs_[k]];
      if (src != mem_of(out[k]) && bytes[outputs_[k]] > 0)
        check(clEnqueueCopyBuffer(q, src, mem_of(out[k]), 0, 0, bytes[outputs_[k]], 0, nullptr,
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
  std::vector<cl_mem> temps_;  // per node; allocated on first run, kept for reuse (grown)
  std::vector<size_t> temp_bytes_;
};

// A dynamic graph's program: its `long` literals that move with a size are kernel arguments
// (lower::template_source), so one build runs every size. A run at new values generates that
// size again (text only, no build) for its launches, node sizes and arguments; a size whose
// text differs otherwise (a dim reaching 1 or 0) runs a static build of its own.
class DynamicExecutable : public kit::Executable {
 public:
  // nullptr when a size changes more than those numbers: the caller compiles `g` static.
  static std::unique_ptr<DynamicExecutable> create(Device& dev, const lt_graph& g,
                                                   const DeviceCaps& caps, const kit::Log& log) {
    auto d = std::unique_ptr<DynamicExecutable>(new DynamicExecutable(dev, g, caps));
    std::string why;
    if (!lower::template_source(g, d->text_of_, "\n__kernel ", "const long", &d->tmpl_, &why)) {
      log(1, "gpu_opencl: dynamic graph compiled static: " + why);
      return nullptr;
    }
    GeneratedProgram gen = generate(g, caps);
    gen.source = d->tmpl_.source;
    log(0, "gpu_opencl: generated dynamic program:\n" + gen.source);
    d->base_ = std::make_unique<OclExecutable>(dev, g, std::move(gen));
    d->base_->build();
    return d;
  }
  bool dynamic() const override { return true; }
  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out) override {
    const lt_graph& g = graph_.view();
    run_at({g.symbol_values, g.num_symbols}, in, out);
  }
  void run_at(std::span<const int64_t> values, std::span<kit::Buffer* const> in,
              std::span<kit::Buffer* const> out) override {
    std::shared_ptr<const Size> s = size_at(values);
    if (s->fallback) return s->fallback->run(in, out);
    base_->run(in, out, s->launches, s->bytes, s->args);
  }
  void stats(const kit::Stats& emit) const override {
    base_->stats(emit);
    emit("dynamic_sizes", static_cast<double>(sizes_));
    emit("dynamic_static_sizes", static_cast<double>(fallbacks_));
  }

 private:
  struct Size {  // what a run at some values needs
    std::vector<KernelLaunch> launches;
    std::vector<size_t> bytes;
    std::vector<std::vector<int64_t>> args;   // per kernel
    std::shared_ptr<OclExecutable> fallback;  // a size whose text differs
  };
  DynamicExecutable(Device& dev, const lt_graph& g, const DeviceCaps& caps)
      : dev_(dev), graph_(lower::copy_graph(g)), caps_(caps) {}
  // The text compared across sizes: the source and the nodes given buffers.
  static std::string text(const GeneratedProgram& gen) {
    std::string s = gen.source + "\n// stored";
    for (int32_t n : gen.stored) s += " " + std::to_string(n);
    return s;
  }
  std::function<std::string(const lt_graph&)> text_of_ = [this](const lt_graph& at) {
    return text(generate(at, caps_));
  };

  std::shared_ptr<const Size> size_at(std::span<const int64_t> values) {
    std::vector<int64_t> key(values.begin(), values.end());
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->first == key) return cache_.splice(cache_.begin(), cache_, it), it->second;
    auto s = std::make_shared<Size>();
    lower::OwnedGraph at = lower::instantiate(graph_.view(), values);
    GeneratedProgram gen = generate(at.view(), caps_);
    if (tmpl_.arguments(text(gen), &s->args)) {
      s->launches = std::move(gen.kernels);
      s->bytes = lower::value_bytes(at.view());
      // A work-group the runtime would choose by size is fixed (64 items where the global size
      // is a multiple, as map kernels' always is, else 8 or 1): PoCL compiles a kernel once
      // per work-group size.
      for (KernelLaunch& l : s->launches)
        if (!l.local[0]) {
          const size_t g0 = l.global[0];
          l.local[0] = l.dims > 1 ? 1 : g0 % 64 == 0 ? 64 : g0 % 8 == 0 ? 8 : 1;
          l.local[1] = l.local[2] = 1;
        }
    } else {
      DeviceCaps caps = caps_;
      caps.dynamic = false;
      s->fallback = std::make_shared<OclExecutable>(dev_, at.view(), generate(at.view(), caps));
      s->fallback->build();
      ++fallbacks_;
    }
    ++sizes_;
    cache_.emplace_front(std::move(key), s);
    if (cache_.size() > 16) cache_.pop_back();
    return s;
  }

  Device& dev_;
  lower::OwnedGraph graph_;
  DeviceCaps caps_;
  lower::SourceTemplate tmpl_;
  std::unique_ptr<OclExecutable> base_;
  std::mutex mu_;  // guards cache_ and the counters
  std::list<std::pair<std::vector<int64_t>, std::shared_ptr<const Size>>> cache_;
  uint64_t sizes_ = 0, fallbacks_ = 0;
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
    if (!lower::dynamic_of(g).empty()) {  // one build for every size, if no size changes it
      DeviceCaps caps = caps_;
      caps.dynamic = true;
      if (auto exe = DynamicExecutable::create(*dev_, g, caps, log_)) {
        ++executables_;
        return exe;
      }
    }
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
