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
#include "lazytensor/lower/decompose.hpp"

namespace lt::ocl {
namespace {

cl_mem mem_of(const kit::Buffer* b) {
  return static_cast<cl_mem>(b->handle);
}

cl_mem create_buffer(const Device& dev, size_t nbytes) {
  cl_int e = CL_SUCCESS;
  // OpenCL refuses zero-sized buffers; empty tensors still get a handle.
  cl_mem m = clCreateBuffer(dev.context()(), CL_MEM_READ_WRITE, nbytes ? nbytes : 1, nullptr, &e);
  if (e == CL_INVALID_BUFFER_SIZE)
    fail(LT_STATUS_OUT_OF_MEMORY,
         "buffer of " + std::to_string(nbytes) + " bytes exceeds the device's maximum allocation");
  check(e, "clCreateBuffer");
  return m;
}

// The temporaries' places in the arena at one size (lower::pack_temporaries over the plan's
// steps), shared by the runs at that size.
using Layout = std::shared_ptr<const lower::ArenaLayout>;

class OclExecutable : public kit::Executable {
 public:
  OclExecutable(Device& dev, const lt_graph& g, GeneratedProgram gen)
      : dev_(dev),
        gen_(std::move(gen)),
        inputs_(g.inputs, g.inputs + g.num_inputs),
        outputs_(g.outputs, g.outputs + g.num_outputs),
        bytes_(lower::value_bytes(g)),
        layout_(layout(dev, g, gen_)) {}
  static Layout layout(const Device& dev, const lt_graph& g, const GeneratedProgram& gen) {
    return std::make_shared<const lower::ArenaLayout>(
        lower::pack_temporaries(g, gen.plan, lower::value_bytes(g), dev.base_align));
  }
  void build() {
    program_ = dev_.program(gen_.source);
    gen_.source.clear();
    for (size_t k = 0; k < gen_.distinct_kernels; ++k) {
      cl_int e = CL_SUCCESS;
      kernels_.emplace_back(program_, ("k" + std::to_string(k)).c_str(), &e);
      check(e, "clCreateKernel");
    }
  }

  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out) override {
    run(in, out, gen_.kernels, bytes_, layout_, {});
  }
  // With the launches, node sizes and temporaries' layout of one size and each kernel's size
  // arguments (`long`s after its buffers) when the program is a dynamic graph's.
  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out,
           const std::vector<KernelLaunch>& launches, const std::vector<size_t>& bytes,
           const Layout& layout, const std::vector<std::vector<int64_t>>& sizes) {
    // clSetKernelArg on a shared kernel is not thread-safe, and the arena is shared.
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<cl_mem> mem(bytes.size(), nullptr);
    for (size_t k = 0; k < in.size(); ++k) mem[inputs_[k]] = mem_of(in[k]);
    for (size_t k = 0; k < out.size(); ++k)
      if (!mem[outputs_[k]]) mem[outputs_[k]] = mem_of(out[k]);
    bind_arena(layout);
    for (size_t i = 0; i < layout->values.size(); ++i) mem[layout->values[i]] = views_[i]();
    cl_command_queue q = dev_.queue()();
    for (size_t i = 0; i < launches.size(); ++i) {
      const KernelLaunch& l = launches[i];
      auto span = kit::current_spans().time("k" + std::to_string(l.kernel), [q] { clFinish(q); });
      cl::Kernel& kernel = kernels_[l.kernel];
      for (size_t a = 0; a < l.args.size(); ++a)
        check(kernel.setArg(static_cast<cl_uint>(a), sizeof(cl_mem), &mem[l.args[a]]),
              "clSetKernelArg");
      // A dynamic program's size arguments (`long`s after the buffers) are per kernel:
      // launches sharing a kernel share its text, numbers included, at every size.
      for (size_t a = 0; l.kernel < sizes.size() && a < sizes[l.kernel].size(); ++a)
        check(kernel.setArg(static_cast<cl_uint>(l.args.size() + a), cl_long{sizes[l.kernel][a]}),
              "clSetKernelArg");
      check(clEnqueueNDRangeKernel(q, kernel(), l.dims, nullptr, l.global,
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
    emit("arena_bytes", static_cast<double>(layout_->arena.bytes));
    double unshared = 0;  // what one buffer per temporary would take
    for (const lower::LiveRange& r : layout_->ranges) unshared += static_cast<double>(r.bytes);
    emit("temporary_bytes", unshared);
  }

 private:
  // One device buffer holds every temporary (allocated on the first run, grown, never shrunk);
  // each temporary is a sub-buffer at its offset, made again when a run brings another layout.
  void bind_arena(const Layout& layout) {
    if (layout == bound_) return;
    views_.clear();
    bound_.reset();
    if (arena_bytes_ < layout->arena.bytes) {
      arena_ = cl::Buffer();  // a failed create leaves none
      arena_bytes_ = 0;
      arena_ = cl::Buffer(create_buffer(dev_, layout->arena.bytes));
      arena_bytes_ = layout->arena.bytes;
    }
    for (size_t i = 0; i < layout->values.size(); ++i) {
      cl_buffer_region r{layout->arena.offsets[i], layout->ranges[i].bytes};
      cl_int e = CL_SUCCESS;
      views_.push_back(
          arena_.createSubBuffer(CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &e));
      check(e, "clCreateSubBuffer");
    }
    bound_ = layout;
  }

  Device& dev_;
  GeneratedProgram gen_;
  cl::Program program_;
  std::vector<cl::Kernel> kernels_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<size_t> bytes_;  // of each node's value
  Layout layout_;              // of the temporaries at the graph's own sizes
  std::mutex mutex_;           // guards kernel arguments and the arena
  cl::Buffer arena_;
  size_t arena_bytes_ = 0;
  std::vector<cl::Buffer> views_;  // sub-buffers of arena_ for bound_'s values
  Layout bound_;
};

// A size of a dynamic graph's one build: its launches, node sizes, arena layout and size
// arguments (lower::template_source makes the `long` literals that move with a size kernel
// arguments); nullptr when the size's text differs otherwise (a dim reaching 1 or 0): the kit's
// PerValue then builds that size static.
struct Size final : kit::Executable {
  std::shared_ptr<OclExecutable> base;
  std::vector<KernelLaunch> launches;
  std::vector<size_t> bytes;
  Layout layout;
  std::vector<std::vector<int64_t>> args;  // per kernel
  void run(std::span<kit::Buffer* const> in, std::span<kit::Buffer* const> out) override {
    base->run(in, out, launches, bytes, layout, args);
  }
};

// The text compared across sizes: the source and the nodes given buffers.
std::string text(const GeneratedProgram& gen) {
  std::string s = gen.source + "\n// stored";
  for (int32_t n : gen.stored) s += " " + std::to_string(n);
  return s;
}

std::unique_ptr<Size> at_size(const Device& dev, const lt_graph& at, const DeviceCaps& caps,
                              const lower::SourceTemplate& tmpl,
                              std::shared_ptr<OclExecutable> base) {
  GeneratedProgram gen = generate(at, caps);
  auto s = std::make_unique<Size>();
  if (!tmpl.arguments(text(gen), &s->args)) return nullptr;
  s->base = std::move(base);
  s->layout = OclExecutable::layout(dev, at, gen);
  s->launches = std::move(gen.kernels);
  s->bytes = lower::value_bytes(at);
  // A work-group the runtime would choose by size is fixed (64 items where the global size
  // is a multiple, as map kernels' always is, else 8 or 1): PoCL compiles a kernel once
  // per work-group size.
  for (KernelLaunch& l : s->launches)
    if (!l.local[0]) {
      const size_t g0 = l.global[0];
      l.local[0] = l.dims > 1 ? 1 : g0 % 64 == 0 ? 64 : g0 % 8 == 0 ? 8 : 1;
      l.local[1] = l.local[2] = 1;
    }
  return s;
}

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
    check(clEnqueueWriteBuffer(dev_->queue()(), mem_of(b), CL_TRUE, offset, n, src, 0, nullptr,
                               nullptr),
          "clEnqueueWriteBuffer");
  }
  void download(const kit::Buffer* b, size_t offset, void* dst, size_t n) override {
    check(clEnqueueReadBuffer(dev_->queue()(), mem_of(b), CL_TRUE, offset, n, dst, 0, nullptr,
                              nullptr),
          "clEnqueueReadBuffer");
  }
  void* host_ptr(kit::Buffer*) override { return nullptr; }

  bool supports(const lt_graph& g, size_t node, size_t) override {
    return node_supported(g, node, caps_);
  }

  std::unique_ptr<kit::Executable> compile(const lt_graph& region, size_t) override {
    lower::OwnedGraph lowered;  // composites of a region from a direct caller, decomposed
    auto ok = [&](const lt_graph& g, size_t i) { return node_supported(g, i, caps_); };
    const lt_graph& g = lower::decompose_declined(region, ok, &lowered) ? lowered.view() : region;
    if (!lower::dynamic_of(g).empty())  // one build for every size, if no size changes it
      if (auto exe = compile_dynamic(g)) return exe;
    return compile_static(g, caps_);
  }

  void stats(const kit::Stats& emit) const override {
    dev_->stats(emit);
    emit("executables", static_cast<double>(executables_.load()));
  }

 private:
  std::unique_ptr<kit::Executable> compile_static(const lt_graph& g, const DeviceCaps& caps) {
    GeneratedProgram gen = generate(g, caps);
    if (g.num_nodes <= 4096) log_(0, "gpu_opencl: generated program:\n" + gen.source);
    auto exe = std::make_unique<OclExecutable>(*dev_, g, std::move(gen));
    exe->build();
    ++executables_;
    return exe;
  }
  // nullptr when a size changes more than the numbers: the caller compiles `g` static.
  std::unique_ptr<kit::Executable> compile_dynamic(const lt_graph& g) {
    DeviceCaps caps = caps_;
    caps.dynamic = true;
    auto tmpl = std::make_shared<lower::SourceTemplate>();
    std::string why;
    auto text_of = [&](const lt_graph& at) { return text(generate(at, caps)); };
    if (!lower::template_source(g, text_of, "\n__kernel ", "const long", tmpl.get(), &why)) {
      log_(1, "gpu_opencl: dynamic graph compiled static: " + why);
      return nullptr;
    }
    GeneratedProgram gen = generate(g, caps);
    gen.source = tmpl->source;
    log_(0, "gpu_opencl: generated dynamic program:\n" + gen.source);
    auto base = std::make_shared<OclExecutable>(*dev_, g, std::move(gen));
    base->build();
    ++executables_;
    auto instance = [&dev = *dev_, caps, tmpl, base](const lt_graph& at) {
      return std::unique_ptr<kit::Executable>(at_size(dev, at, caps, *tmpl, base));
    };
    auto own = [&dev = *dev_, caps = caps_](const lt_graph& at) {
      auto exe = std::make_unique<OclExecutable>(dev, at, generate(at, caps));
      exe->build();
      return std::unique_ptr<kit::Executable>(std::move(exe));
    };
    return std::make_unique<kit::PerValue>(g, base, instance, own, 16);
  }

  kit::Log log_;
  std::unique_ptr<Device> dev_;
  DeviceCaps caps_;
  std::atomic<uint64_t> executables_{0};
};

}  // namespace
}  // namespace lt::ocl

LT_KIT_PLUGIN(lt::ocl::OpenclBackend, "gpu_opencl", "0.2.0")
