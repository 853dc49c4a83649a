// run.cpp — executes a resolved plan over a collected graph (run.h).
#include "run.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "custom_ops.h"
#include "device_client.h"
#include "dist.h"
#include "error.h"
#include "profile.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;

// The host address of a buffer of a host-addressable device, else nullptr.
void* host_view(const Buffer* b) {
  return b->nbytes ? client::host_ptr(b->device, b->handle) : nullptr;
}

std::string node_desc(const Node* n) {
  return fmt::format("{} {}", lt_dtype_name(n->dtype), dims_str(n->shape));
}

BufferPtr transfer(Runtime* rt, const Buffer* src, Device* to) {
  Span span(rt, "transfer", "transfer");
  if (span.on())
    span.args(fmt::format("\"bytes\": {}, \"from\": \"{}\", \"to\": \"{}\"", src->nbytes,
                          src->device->name, to->name));
  BufferPtr dst = to->allocator->allocate(src->nbytes);
  Device* from = src->device;
  size_t nb = src->nbytes;
  if (nb) {
    void* sp = nullptr;
    void* dp = nullptr;
    if (from->host_addressable && to->host_addressable) {
      sp = client::host_ptr(from, src->handle);
      dp = client::host_ptr(to, dst->handle);
    }
    if (sp && dp) {
      std::memcpy(dp, sp, nb);
    } else {
      std::vector<unsigned char> tmp(nb);
      download_from(from, src, tmp.data(), nb);
      upload_to(to, dst.get(), tmp.data(), nb);
    }
  }
  rt->metrics.bytes_between_backends.fetch_add(nb, std::memory_order_relaxed);
  return dst;
}

// A run of a plan compiled for bucket sizes (lower::mask_padding): the padded copies of c's
// inputs with dynamic dims, the sizes as inputs, and the roots' padded and valid shapes.
struct Padding {
  std::vector<BufferPtr> inputs;  // per graph input: its buffer, or null for the node's own
  std::vector<lower::Shape> root_padded, root_valid;
};

// Copies the box both shapes share from `src` (shape `from`) to `dst` (shape `to`, zeroed
// first), row-major, elements of `esize` bytes.
void copy_box(const char* src, const lower::Shape& from, char* dst, const lower::Shape& to,
              size_t esize) {
  size_t dst_bytes = esize;
  for (int64_t d : to) dst_bytes *= static_cast<size_t>(d);
  if (dst_bytes == 0) return;  // an empty value (and dst may be null)
  std::memset(dst, 0, dst_bytes);
  const size_t rank = from.size();
  if (rank == 0) return std::memcpy(dst, src, esize), void();
  std::vector<int64_t> box(rank), idx(rank, 0);
  for (size_t d = 0; d < rank; ++d) box[d] = std::min(from[d], to[d]);
  if (std::find(box.begin(), box.end(), 0) != box.end()) return;
  const size_t row = static_cast<size_t>(box[rank - 1]) * esize;
  for (;;) {
    int64_t so = 0, doff = 0;
    for (size_t d = 0; d + 1 < rank; ++d) so = so * from[d] + idx[d], doff = doff * to[d] + idx[d];
    std::memcpy(dst + static_cast<size_t>(doff * to[rank - 1]) * esize,
                src + static_cast<size_t>(so * from[rank - 1]) * esize, row);
    size_t d = rank - 1;
    while (d-- > 0 && ++idx[d] == box[d]) idx[d] = 0;
    if (d == SIZE_MAX) return;
  }
}

// `b` (shape `from`, on `dev`) as a new buffer of shape `to`: the shared box copied, the rest 0.
BufferPtr reshape_box(Device* dev, const Buffer* b, const lower::Shape& from,
                      const lower::Shape& to, size_t esize) {
  size_t bytes = esize;
  for (int64_t d : to) bytes *= static_cast<size_t>(d);
  BufferPtr out = dev->allocator->allocate(bytes);
  if (bytes == 0) return out;
  std::vector<char> in(b->nbytes), tmp(bytes);
  if (!in.empty()) download_from(b->device, b, in.data(), in.size());
  copy_box(in.data(), from, tmp.data(), to, esize);
  upload_to(dev, out.get(), tmp.data(), bytes);
  return out;
}

// Buffer donation (docs/memory.md): per graph input, whether this run may write an output
// into its buffer. Only when nothing outside this graph can read the value again: its only
// references are this graph's operand slots (no tensor handle, autograd record, DLPack export,
// checkpoint or other pending graph; `job_refs`: the queued job's own), it reaches no node that
// outlives the run (a non-root node held from outside keeps its operands), and its buffer is
// the core's own (not a DLPack import's lent memory, not a scalar uploaded for the run).
std::vector<char> donatable_inputs(const Collected& c, uint32_t job_refs) {
  const size_t n = c.nodes.size();
  std::vector<uint32_t> uses(n, 0);
  for (int32_t o : c.operand_idx) ++uses[static_cast<size_t>(o)];
  std::vector<char> root(n, 0), survives(n, 0);
  for (int32_t o : c.outputs) root[static_cast<size_t>(o)] = 1;
  for (size_t i = n; i-- > 0;) {
    if (c.is_input(i)) continue;
    if (!root[i] && c.nodes[i]->refs.load(std::memory_order_acquire) > uses[i]) survives[i] = 1;
    if (survives[i])
      for (int32_t k = c.op_begin[i]; k < c.op_begin[i + 1]; ++k)
        survives[static_cast<size_t>(c.operand_idx[k])] = 1;
  }
  std::vector<char> ok(c.inputs.size(), 0);
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const size_t i = static_cast<size_t>(c.inputs[k]);
    const Node* in = c.nodes[i];
    ok[k] = !survives[i] && !in->has_scalar && in->buffer && !in->buffer->lender_release &&
            in->refs.load(std::memory_order_acquire) == uses[i] + job_refs;
  }
  return ok;
}

// `symbols`: the values a dynamic plan runs at (empty for a static plan); `pad`: a bucket run.
void run_plan(Device* dev, const Plan& whole, Collected& c, std::span<const int64_t> symbols = {},
              Padding* pad = nullptr, bool queued = false) {
  const CompiledPlan& plan = *whole.compiled();
  Runtime* rt = dev->runtime;
  auto t0 = Clock::now();
  const size_t n = plan.graph_nodes;
  std::vector<const Buffer*> home(n, nullptr);
  std::vector<BufferPtr> produced(n);
  struct Moved {
    int32_t g;
    Device* dev;
    BufferPtr buf;
  };
  std::vector<Moved> moved;
  size_t collective_bytes = 0;

  for (size_t k = 0; k < c.inputs.size(); ++k) {
    Node* in = c.nodes[c.inputs[k]];
    if (!in->buffer && in->has_scalar) {
      BufferPtr b = dev->allocator->allocate(lt_dtype_size(in->dtype));
      upload_to(dev, b.get(), &in->scalar_bits, lt_dtype_size(in->dtype));
      in->buffer = std::move(b);
      in->materialized.store(true, std::memory_order_release);
    }
    if (!in->buffer)
      fail(LT_STATUS_INTERNAL,
           "graph input {} ({}) has no buffer (donated to an earlier run of this graph that "
           "failed?)",
           k, node_desc(in));
    home[plan.graph_inputs[k]] = pad && pad->inputs[k] ? pad->inputs[k].get() : in->buffer.get();
  }
  for (const auto& [node, buf] : plan.constants) home[node] = buf.get();  // folded constants
  if (pad)  // the sizes, after c's inputs
    for (size_t k = c.inputs.size(); k < plan.graph_inputs.size(); ++k)
      home[plan.graph_inputs[k]] = pad->inputs[k].get();
  auto buffer_on = [&](int32_t g, Device* d) -> lt_plugin_buffer* {
    const Buffer* b = home[g];
    if (b->device == d) return b->handle;
    for (auto& m : moved)
      if (m.g == g && m.dev == d) return m.buf->handle;
    moved.push_back({g, d, transfer(rt, b, d)});
    return moved.back().buf->handle;
  };

  std::vector<char> donatable;
  bool any_donor = false;
  if (symbols.empty() && !pad)
    for (const Region& r : plan.regions)
      for (int32_t d : r.donor) any_donor = any_donor || d >= 0;
  if (any_donor) donatable = donatable_inputs(c, queued ? 1 : 0);
  uint64_t donated = 0;
  // Output k of region r takes its donor's buffer when this run may donate it, else a new one.
  auto output_buffer = [&](const Region& r, size_t k, size_t bytes) -> BufferPtr {
    const int32_t d = donatable.empty() || k >= r.donor.size() ? -1 : r.donor[k];
    // A donor past the collected graph's inputs is one of the optimiser's folded constants
    // (plan.constants), kept with the plan for every run: never donated.
    if (d >= 0 && static_cast<size_t>(d) < donatable.size() && donatable[static_cast<size_t>(d)]) {
      Node* in = c.nodes[c.inputs[static_cast<size_t>(d)]];
      if (in->buffer->device == r.dev && in->buffer->capacity >= bytes) {
        donatable[static_cast<size_t>(d)] = 0;
        donated += in->buffer->nbytes;
        rt->metrics.donated_buffers.fetch_add(1, std::memory_order_relaxed);
        return std::move(in->buffer);  // home[] still points at it: the region reads it
      }
    }
    return r.dev->allocator->allocate(bytes);
  };

  // Collectives: every rank checks that the others are about to run the same graph.
  if (plan.collectives) dist_check_graph(plan, c);
  std::vector<lt_plugin_buffer*> ins, outs;
  for (size_t ri = 0; ri < plan.regions.size(); ++ri) {
    const Region& r = plan.regions[ri];
    auto region_t0 = Clock::now();
    auto region_done = [&] {
      plan.region_ns[ri].fetch_add(
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - region_t0)
                  .count()),
          std::memory_order_relaxed);
    };
    if (!r.dev && plan.host_nodes[r.host_node].collective) {
      // Operand to host memory, the collective over MPI, the result onto the graph's device;
      // both copies count as host<->device bytes when the device's memory is not the host's.
      // Host-addressable buffers (cpu_eager, cpu_jit, tpu_sim) are used in place: MPI reads the
      // operand's memory and writes the result's, no copies.
      const HostNode& h = plan.host_nodes[r.host_node];
      const Buffer* b = home[h.operands[0]];
      const size_t in_bytes = b->nbytes, out_bytes = dist_output_bytes(h, in_bytes);
      produced[h.node] = dev->allocator->allocate(out_bytes);
      home[h.node] = produced[h.node].get();
      const void* in = host_view(b);
      void* out = host_view(produced[h.node].get());
      thread_local std::vector<unsigned char> in_copy, out_copy;  // reused: no fresh pages
      if (!in) {
        in_copy.resize(in_bytes);
        download_from(b->device, b, in_copy.data(), in_bytes);
        rt->metrics.bytes_from_device.fetch_add(in_bytes, std::memory_order_relaxed);
        in = in_copy.data();
      }
      const bool upload = out == nullptr;
      if (upload) {
        out_copy.resize(out_bytes);
        out = out_copy.data();
      }
      {
        Span span(rt, "collective", h.name);
        if (span.on()) span.args(fmt::format("\"bytes\": {}", in_bytes));
        dist_run(h, in, in_bytes, out);
      }
      if (upload) {
        upload_to(dev, produced[h.node].get(), out, out_bytes);
        rt->metrics.bytes_to_device.fetch_add(out_bytes, std::memory_order_relaxed);
      }
      collective_bytes += in_bytes;
      region_done();
      continue;
    }
    if (!r.dev) {
      // Custom op: operands copied to host, the CPU kernel, the result onto the graph's device.
      const HostNode& h = plan.host_nodes[r.host_node];
      std::vector<std::vector<unsigned char>> host(h.operands.size());
      std::vector<lt_custom_op_tensor> args(h.operands.size());
      for (size_t k = 0; k < h.operands.size(); ++k) {
        const Buffer* b = home[h.operands[k]];
        host[k].resize(b->nbytes);
        download_from(b->device, b, host[k].data(), host[k].size());
      }
      for (size_t k = 0; k < h.operands.size(); ++k) {
        const lower::Desc& d = h.operand_descs[k];
        args[k] = {d.dtype, d.shape.size(), d.shape.data(), host[k].data()};
      }
      lt_graph_node gn{h.name.c_str(),
                       h.dtype,
                       h.shape.size(),
                       h.shape.data(),
                       0,
                       nullptr,
                       h.attrs ? h.attrs->view.size() : 0,
                       h.attrs ? h.attrs->view.data() : nullptr};
      int64_t numel = 1;
      for (int64_t d : h.shape) numel *= d;
      std::vector<unsigned char> out(static_cast<size_t>(numel) * lt_dtype_size(h.dtype));
      {
        Span span(rt, "execute", "custom op " + h.name);
        run_custom_kernel(*h.op, gn, args, out.data());
      }
      produced[h.node] = dev->allocator->allocate(out.size());
      upload_to(dev, produced[h.node].get(), out.data(), out.size());
      home[h.node] = produced[h.node].get();
      region_done();
      continue;
    }
    ins.clear();
    outs.clear();
    for (int32_t g : r.in_globals) ins.push_back(buffer_on(g, r.dev));
    for (size_t k = 0; k < r.out_globals.size(); ++k) {
      int32_t g = r.out_globals[k];
      produced[g] = output_buffer(r, k,
                                  symbols.empty()
                                      ? r.out_bytes[k]
                                      : lower::bytes_at(r.out_forms[k], r.out_dtypes[k], symbols));
      home[g] = produced[g].get();
      outs.push_back(produced[g]->handle);
    }
    region_t0 = Clock::now();  // the execute call only: transfers above are not the region's
    {
      Span span(rt, "execute", "region");
      if (span.on())
        span.args(fmt::format("\"region\": {}, \"label\": {}", ri,
                              nlohmann::json(plan.region_labels[ri]).dump()));
      client::execute(r.dev, r.exe, ins, outs, symbols);
    }
    region_done();
  }
  // Roots take their buffers (on the graph's device); then the graph is cut.
  std::vector<BufferPtr> root_bufs;
  for (int32_t g : plan.graph_outputs) {
    if (produced[g] && produced[g]->device == dev)
      root_bufs.push_back(std::move(produced[g]));
    else
      root_bufs.push_back(transfer(rt, home[g], dev));
  }
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    Node* root = c.nodes[c.outputs[k]];
    if (pad && pad->root_padded[k] != pad->root_valid[k])
      root_bufs[k] = reshape_box(dev, root_bufs[k].get(), pad->root_padded[k], pad->root_valid[k],
                                 lt_dtype_size(root->dtype));
    root->buffer = std::move(root_bufs[k]);
    root->materialized.store(true, std::memory_order_release);
  }
  for (int32_t g : c.outputs) node_drop_operands(c.nodes[g]);
  if (!plan.op_counts.empty()) {
    rt->metrics.fallback_nodes.fetch_add(plan.fallback_nodes, std::memory_order_relaxed);
    rt->metrics.decomposed_nodes.fetch_add(plan.decomposed_nodes, std::memory_order_relaxed);
    std::lock_guard lk(rt->metrics.mu);
    for (const auto& [key, count] : plan.op_counts) rt->metrics.named[key] += count;
  }
  if (whole.made != Plan::Made::kInline)
    rt->metrics.add_named(whole.made == Plan::Made::kBackground
                              ? "background_compile.compiled_steps"
                              : "background_compile.eager_steps",
                          1);
  if (plan.collectives) {
    std::lock_guard lk(rt->metrics.mu);
    rt->metrics.named["collective.calls"] += static_cast<double>(plan.collectives);
    rt->metrics.named["collective.bytes"] += static_cast<double>(collective_bytes);
  }
  rt->metrics.graphs_executed.fetch_add(1, std::memory_order_relaxed);
  rt->metrics.donated_bytes.fetch_add(donated, std::memory_order_relaxed);
  rt->metrics.donated_bytes_last.store(donated, std::memory_order_relaxed);
  const auto ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  rt->metrics.execute_ns.fetch_add(ns, std::memory_order_relaxed);
  whole.runs.fetch_add(1, std::memory_order_relaxed);
  whole.run_ns.fetch_add(ns, std::memory_order_relaxed);
}

}  // namespace

// Runs c as `run` says: for a bucket, inputs copied into padded buffers, the sizes as inputs,
// roots cut back to their own shapes.
void run(Device* dev, const Run& run, Collected& c) {
  Span span(dev->runtime, "stage", "run");
  if (span.on()) span.args(fmt::format("\"graph\": \"{:016x}\"", run.plan->key));
  if (!run.padded) return run_plan(dev, *run.plan, c, run.symbols, nullptr, run.queued);
  Padding pad;
  pad.inputs.resize(run.plan->compiled()->graph_inputs.size());
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    Node* in = c.nodes[c.inputs[k]];
    lower::Shape have(in->shape.begin(), in->shape.end());
    if (run.in_padded[k] != have && in->buffer)
      pad.inputs[k] =
          reshape_box(dev, in->buffer.get(), have, run.in_padded[k], lt_dtype_size(in->dtype));
  }
  for (size_t k = c.inputs.size(); k < pad.inputs.size(); ++k) {
    const float size = static_cast<float>(run.symbols[k - c.inputs.size()]);
    pad.inputs[k] = dev->allocator->allocate(sizeof(float));
    upload_to(dev, pad.inputs[k].get(), &size, sizeof(float));
  }
  pad.root_padded = run.root_padded;
  for (int32_t o : c.outputs)
    pad.root_valid.emplace_back(c.nodes[o]->shape.begin(), c.nodes[o]->shape.end());
  dev->runtime->metrics.add_named("dynamic.padded_runs", 1);
  run_plan(dev, *run.plan, c, {}, &pad);
}

}  // namespace lt
