// loader.cpp — lt_onnx_model: load-time checks (opsets, types, well-formedness, topological
// order), initializers uploaded once, the trace of a run, and the C API of lt_onnx.h.
#include "importer.hpp"
#include "lazytensor/lt_onnx.h"
#include "lazytensor/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <sstream>

using namespace lt::onnx::detail;

struct IoInfo {
  std::string name;
  int32_t ot = 0;
  lt::DType dt = LT_DTYPE_INVALID;
  bool has_rank = false;
  std::vector<int64_t> dims;  // -1: symbolic or unknown
  std::vector<std::string> params;
};

struct lt_onnx_model {
  std::string path, base_dir;
  ModelP m;
  int64_t opset = 0;
  lt::Device dev;
  std::vector<IoInfo> inputs, outputs;
  std::map<std::string, Value> inits;
  std::vector<size_t> order;
};

namespace lt::onnx::detail {

std::vector<uint8_t> read_file_range(const std::string& path, uint64_t offset, int64_t length,
                                     uint64_t max_bytes) {
  lt::file::RegularFile f;
  std::string why;
  if (!f.open(path, &why))
    fail(f.error() == EINVAL ? LT_STATUS_IO_ERROR : LT_STATUS_NOT_FOUND,
         path + ": " + (f.error() == EINVAL ? why : "cannot open: " + why));
  const uint64_t size = f.size();
  if (offset > size)
    fail(LT_STATUS_IO_ERROR, path + ": offset " + std::to_string(offset) +
                                 " is past the end of the file (" + std::to_string(size) +
                                 " bytes)");
  const uint64_t n = length < 0 ? size - offset : static_cast<uint64_t>(length);
  if (n > size - offset)
    fail(LT_STATUS_IO_ERROR, path + ": " + std::to_string(n) + " bytes at offset " +
                                 std::to_string(offset) + " exceed the file's " +
                                 std::to_string(size) + " bytes");
  if (n > max_bytes)
    fail(LT_STATUS_IO_ERROR,
         path + ": " + std::to_string(n) + " bytes, more than the " + std::to_string(max_bytes) +
             " this file may have" +
             (max_bytes == kMaxProtoBytes ? " (protobuf's 2 GiB message limit: keep large weights "
                                            "in external-data files)"
                                          : ""));
  std::vector<uint8_t> buf(static_cast<size_t>(n));
  if (n && !f.read_at(buf.data(), buf.size(), offset, &why))
    fail(LT_STATUS_IO_ERROR, path + ": " + why);
  return buf;
}

namespace {

std::string node_label(const NodeP& n, int64_t opset) {
  return "node '" +
         (n.name.empty() ? (n.outputs.empty() ? std::string("?") : n.outputs[0]) : n.name) + "' (" +
         n.op_type + ", opset " + std::to_string(opset) + ")";
}

IoInfo io_info(const ValueInfoP& v, const std::string& path, const char* what) {
  if (v.kind != "tensor" && !v.kind.empty()) {
    fail(LT_STATUS_UNSUPPORTED, "out of scope: " + path + ": graph " + what + " '" + v.name +
                                    "' is a " + v.kind + ", not a tensor");
  }
  if (v.elem_type == kString) {
    fail(LT_STATUS_UNSUPPORTED,
         "out of scope: " + path + ": graph " + what + " '" + v.name + "' is a string tensor");
  }
  IoInfo io;
  io.name = v.name;
  io.ot = v.elem_type;
  io.dt = carrier_dtype(v.elem_type);
  if (io.dt == LT_DTYPE_INVALID) {
    fail(LT_STATUS_DTYPE_MISMATCH, path + ": graph " + what + " '" + v.name +
                                       "' has element type " + onnx_type_name(v.elem_type) +
                                       ", which LazyTensor does not carry");
  }
  io.has_rank = v.has_shape;
  for (const DimP& d : v.dims) {
    io.dims.push_back(d.has_value ? d.value : -1);
    io.params.push_back(d.param);
  }
  return io;
}

void check_and_order(lt_onnx_model& M) {
  const GraphP& g = M.m.graph;
  const std::string& path = M.path;
  std::map<std::string, size_t> producer;
  std::set<std::string> sources;
  for (const ValueInfoP& v : g.inputs) sources.insert(v.name);
  for (const TensorP& t : g.initializers) sources.insert(t.name);
  for (const ValueInfoP& v : g.value_infos) {
    if (!v.kind.empty() && v.kind != "tensor") {
      fail(LT_STATUS_UNSUPPORTED,
           "out of scope: " + path + ": value '" + v.name + "' is a " + v.kind + ", not a tensor");
    }
  }
  const auto& table = op_table();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeP& n = g.nodes[i];
    int64_t opset = M.opset;
    bool std_domain = n.domain.empty() || n.domain == "ai.onnx";
    if (!std_domain) {
      for (auto& [d, v] : M.m.opsets) {
        if (d == n.domain) opset = v;
      }
    }
    std::string label = path + ": " + node_label(n, opset);
    std::string oos = out_of_scope_reason(n.domain, n.op_type);
    if (!oos.empty()) fail(LT_STATUS_UNSUPPORTED, "out of scope: " + label + ": " + oos);
    if (!std_domain) {
      fail(LT_STATUS_UNSUPPORTED, label + ": domain '" + n.domain + "' is not supported");
    }
    if (opset > LT_ONNX_MAX_OPSET) {
      fail(LT_STATUS_UNSUPPORTED, label + ": opset " + std::to_string(opset) +
                                      " is newer than the newest supported (" +
                                      std::to_string(LT_ONNX_MAX_OPSET) + ")");
    }
    auto it = table.find(n.op_type);
    if (it == table.end()) fail(LT_STATUS_UNSUPPORTED, label + ": op type not supported");
    if (opset < it->second.since) {
      fail(LT_STATUS_UNSUPPORTED,
           label + ": supported from opset " + std::to_string(it->second.since));
    }
    for (const AttributeP& a : n.attributes) {
      if (a.has_graph) {
        fail(LT_STATUS_UNSUPPORTED,
             label + ": attribute '" + a.name + "' is a subgraph; control flow is not supported");
      }
      if (!a.ref_attr_name.empty()) {
        fail(LT_STATUS_UNSUPPORTED,
             label + ": attribute '" + a.name + "' references a function attribute");
      }
    }
    for (const std::string& o : n.outputs) {
      if (o.empty()) continue;
      if (producer.count(o) || sources.count(o)) {
        fail(LT_STATUS_INVALID_ARGUMENT, label + ": output '" + o + "' is defined twice");
      }
      producer[o] = i;
    }
  }
  // Kahn's algorithm over the node inputs; what is left is a cycle.
  std::vector<size_t> pending(g.nodes.size(), 0);
  std::vector<std::vector<size_t>> users(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeP& n = g.nodes[i];
    for (const std::string& in : n.inputs) {
      if (in.empty() || sources.count(in)) continue;
      auto p = producer.find(in);
      if (p == producer.end()) {
        fail(LT_STATUS_INVALID_ARGUMENT, path + ": " + node_label(n, M.opset) + ": input '" + in +
                                             "' is not a graph input, an initializer or a node "
                                             "output (missing initializer?)");
      }
      ++pending[i];
      users[p->second].push_back(i);
    }
  }
  std::deque<size_t> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop_front();
    M.order.push_back(i);
    for (size_t u : users[i]) {
      if (--pending[u] == 0) ready.push_back(u);
    }
  }
  if (M.order.size() != g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (pending[i]) {
        fail(LT_STATUS_INVALID_ARGUMENT,
             path + ": the graph has a cycle through " + node_label(g.nodes[i], M.opset));
      }
    }
  }
  for (const ValueInfoP& o : g.outputs) {
    if (!sources.count(o.name) && !producer.count(o.name)) {
      fail(LT_STATUS_INVALID_ARGUMENT,
           path + ": graph output '" + o.name + "' is not produced by any node");
    }
  }
}

void load(lt_onnx_model& M) {
  std::vector<uint8_t> bytes = read_whole_file(M.path, kMaxProtoBytes);
  try {
    M.m = parse_model(bytes.data(), bytes.size());
  } catch (const ParseError& e) {
    fail(LT_STATUS_IO_ERROR, M.path + ": not a valid ONNX model: " + e.what());
  }
  if (!M.m.has_graph) fail(LT_STATUS_IO_ERROR, M.path + ": not a valid ONNX model: no graph");
  if (M.m.ir_version < 3) {
    fail(LT_STATUS_IO_ERROR, M.path + ": ir_version " + std::to_string(M.m.ir_version) +
                                 " is not supported (3 or newer)");
  }
  M.opset = -1;
  for (auto& [d, v] : M.m.opsets) {
    if (d.empty() || d == "ai.onnx") M.opset = v;
  }
  if (M.opset < 0) {
    bool needs = false;
    for (const NodeP& n : M.m.graph.nodes) needs |= n.domain.empty() || n.domain == "ai.onnx";
    if (needs) fail(LT_STATUS_IO_ERROR, M.path + ": no opset_import for the ai.onnx domain");
  }
  std::set<std::string> init_names;
  for (const TensorP& t : M.m.graph.initializers) {
    if (!init_names.insert(t.name).second) {
      fail(LT_STATUS_INVALID_ARGUMENT, M.path + ": initializer '" + t.name + "' is defined twice");
    }
  }
  for (const ValueInfoP& v : M.m.graph.inputs) {
    if (!init_names.count(v.name)) M.inputs.push_back(io_info(v, M.path, "input"));
  }
  for (const ValueInfoP& v : M.m.graph.outputs) M.outputs.push_back(io_info(v, M.path, "output"));
  check_and_order(M);
  // Initializers: uploaded once; small ones also kept on the host for shape computations.
  for (const TensorP& t : M.m.graph.initializers) {
    RawTensor r = decode_tensor(t, M.base_dir, M.path + ": initializer '" + t.name + "'");
    Value v;
    v.present = true;
    v.ot = r.ot;
    lt_tensor* out = nullptr;
    check(lt_tensor_from_host(M.dev.get(), carrier_dtype(r.ot), r.shape.data(), r.shape.size(),
                              r.bytes.data(), r.bytes.size(), &out));
    v.t = Tensor(out);
    v.t.materialize();
    if (r.numel() <= 4096) {
      auto h = std::make_shared<HostVals>();
      h->shape = r.shape;
      h->v = raw_to_doubles(r);
      v.h = h;
      DType dt = carrier_dtype(r.ot);
      v.shape_class = dt == LT_DTYPE_I32 || dt == LT_DTYPE_I64;
    }
    M.inits[t.name] = std::move(v);
  }
}

std::vector<Tensor> run(lt_onnx_model& M,
                        const std::vector<std::pair<std::string, Tensor>>& feeds) {
  std::map<std::string, Value> env;
  for (auto& [name, v] : M.inits) env[name] = v;
  std::set<std::string> given;
  for (auto& [name, t] : feeds) {
    const IoInfo* io = nullptr;
    for (const IoInfo& i : M.inputs) {
      if (i.name == name) io = &i;
    }
    if (!io) {
      bool is_init = false;
      for (auto& [n, v] : M.inits) is_init |= n == name;
      if (!is_init) fail(LT_STATUS_NOT_FOUND, M.path + ": the model has no input '" + name + "'");
    }
    if (!given.insert(name).second) {
      fail(LT_STATUS_INVALID_ARGUMENT, M.path + ": input '" + name + "' given twice");
    }
    if (!t.defined()) fail(LT_STATUS_INVALID_ARGUMENT, M.path + ": input '" + name + "' is null");
    Tensor x = t;
    int32_t ot = io ? io->ot : env[name].ot;
    if (x.dtype() != carrier_dtype(ot)) {
      fail(LT_STATUS_DTYPE_MISMATCH, M.path + ": input '" + name + "' is " + dtype_name(x.dtype()) +
                                         ", the model declares " + onnx_type_name(ot) +
                                         " (carried as " + dtype_name(carrier_dtype(ot)) + ")");
    }
    if (io && io->has_rank) {
      auto s = x.shape();
      bool ok = s.size() == io->dims.size();
      for (size_t i = 0; ok && i < s.size(); ++i) ok = io->dims[i] < 0 || io->dims[i] == s[i];
      if (!ok) {
        fail(LT_STATUS_SHAPE_MISMATCH, M.path + ": input '" + name + "' has shape " +
                                           lt::detail::shape_string(s) + ", the model declares " +
                                           lt::detail::shape_string(io->dims) + " (-1: any)");
      }
      for (size_t i = 0; i < s.size(); ++i) {
        if (!io->params[i].empty()) x.mark_dynamic(i);
      }
    }
    if (x.device() != M.dev) x = x.to(M.dev);
    Value v;
    v.present = true;
    v.ot = ot;
    v.t = x;
    env[name] = v;
  }
  for (const IoInfo& i : M.inputs) {
    if (!given.count(i.name)) {
      fail(LT_STATUS_INVALID_ARGUMENT, M.path + ": input '" + i.name + "' was not given");
    }
  }
  Ctx ctx;
  ctx.dev = M.dev;
  ctx.opset = M.opset;
  ctx.base_dir = M.base_dir;
  const auto& table = op_table();
  for (size_t idx : M.order) {
    const NodeP& n = M.m.graph.nodes[idx];
    ctx.node = &n;
    std::vector<Value> ins;
    for (const std::string& in : n.inputs) ins.push_back(in.empty() ? Value{} : env.at(in));
    std::vector<Value> outs;
    try {
      outs = table.at(n.op_type).fn(ctx, n, ins);
    } catch (const ImportError& e) {
      fail(e.code, M.path + ": " + node_label(n, M.opset) + ": " + e.what());
    } catch (const lt::Error& e) {
      fail(e.code(), M.path + ": " + node_label(n, M.opset) + ": " + e.what());
    } catch (const std::exception& e) {
      fail(LT_STATUS_INTERNAL, M.path + ": " + node_label(n, M.opset) + ": " + e.what());
    }
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) {
      if (!n.outputs[i].empty()) env[n.outputs[i]] = outs[i];
    }
    for (size_t i = outs.size(); i < n.outputs.size(); ++i) {
      if (!n.outputs[i].empty()) {
        fail(LT_STATUS_UNSUPPORTED, M.path + ": " + node_label(n, M.opset) + ": output " +
                                        std::to_string(i) + " ('" + n.outputs[i] +
                                        "') is not supported");
      }
    }
  }
  std::vector<Tensor> result;
  for (const IoInfo& o : M.outputs) {
    Value& v = env.at(o.name);
    if (!v.present) fail(LT_STATUS_INTERNAL, M.path + ": output '" + o.name + "' has no value");
    result.push_back(ctx.T(v));
  }
  return result;
}

lt_error* to_error(const std::exception& e) {
  if (auto* ie = dynamic_cast<const ImportError*>(&e)) return lt_error_create(ie->code, ie->what());
  if (auto* le = dynamic_cast<const lt::Error*>(&e)) return lt_error_create(le->code(), le->what());
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return lt_error_create(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  return lt_error_create(LT_STATUS_INTERNAL, e.what());
}

template <class F>
lt_error* guard(F&& f) {
  try {
    f();
    return nullptr;
  } catch (const std::exception& e) {
    return to_error(e);
  } catch (...) {
    return lt_error_create(LT_STATUS_INTERNAL, "unknown error");
  }
}

std::string describe(const ModelP& m, const std::string& path, const std::vector<IoInfo>* ins,
                     const std::vector<IoInfo>* outs) {
  std::ostringstream os;
  os << "model: " << path << "\n";
  os << "ir_version: " << m.ir_version;
  if (!m.producer_name.empty())
    os << "  producer: " << m.producer_name << " " << m.producer_version;
  os << "\nopsets:";
  for (auto& [d, v] : m.opsets) os << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  os << "\n";
  auto io_line = [&](const IoInfo& io) {
    os << "  " << io.name << ": " << onnx_type_name(io.ot);
    if (io.has_rank) {
      os << " [";
      for (size_t i = 0; i < io.dims.size(); ++i) {
        if (i) os << ",";
        if (!io.params[i].empty())
          os << io.params[i];
        else if (io.dims[i] < 0)
          os << "?";
        else
          os << io.dims[i];
      }
      os << "]";
    }
    os << "\n";
  };
  if (ins) {
    os << "inputs:\n";
    for (const IoInfo& io : *ins) io_line(io);
    os << "outputs:\n";
    for (const IoInfo& io : *outs) io_line(io);
  }
  os << "initializers: " << m.graph.initializers.size() << "\n";
  std::map<std::string, int> counts;
  for (const NodeP& n : m.graph.nodes)
    counts[(n.domain.empty() ? "" : n.domain + ":") + n.op_type]++;
  os << "ops (" << m.graph.nodes.size() << " nodes):\n";
  const auto& table = op_table();
  for (auto& [op, c] : counts) {
    std::string oos;
    size_t colon = op.find(':');
    std::string dom = colon == std::string::npos ? "" : op.substr(0, colon);
    std::string type = colon == std::string::npos ? op : op.substr(colon + 1);
    oos = out_of_scope_reason(dom, type);
    const char* status = !oos.empty()                                             ? "out of scope"
                         : (dom.empty() || dom == "ai.onnx") && table.count(type) ? "supported"
                                                                                  : "NOT supported";
    os << "  " << op << " x" << c << "  " << status << "\n";
  }
  return os.str();
}

}  // namespace
}  // namespace lt::onnx::detail

extern "C" {

LT_API lt_error* lt_onnx_load(lt_device* device, const char* path, lt_onnx_model** out) {
  if (!device || !path || !out)
    return lt_error_create(LT_STATUS_INVALID_ARGUMENT, "lt_onnx_load: null argument");
  auto M = std::make_unique<lt_onnx_model>();
  lt_error* err = guard([&] {
    M->path = path;
    size_t slash = M->path.rfind('/');
    M->base_dir = slash == std::string::npos ? "." : M->path.substr(0, slash);
    M->dev = lt::Device(device);
    load(*M);
  });
  if (err) return err;
  *out = M.release();
  return nullptr;
}

LT_API void lt_onnx_free(lt_onnx_model* model) {
  delete model;
}

LT_API size_t lt_onnx_input_count(const lt_onnx_model* m) {
  return m ? m->inputs.size() : 0;
}
LT_API size_t lt_onnx_output_count(const lt_onnx_model* m) {
  return m ? m->outputs.size() : 0;
}
LT_API const char* lt_onnx_input_name(const lt_onnx_model* m, size_t i) {
  return m && i < m->inputs.size() ? m->inputs[i].name.c_str() : nullptr;
}
LT_API const char* lt_onnx_output_name(const lt_onnx_model* m, size_t i) {
  return m && i < m->outputs.size() ? m->outputs[i].name.c_str() : nullptr;
}

static lt_error* io_info_c(const std::vector<IoInfo>* v, size_t i, lt_dtype* dtype, size_t* rank,
                           const int64_t** dims, const char** onnx_type) {
  if (!v || i >= v->size())
    return lt_error_create(LT_STATUS_INVALID_ARGUMENT, "lt_onnx: index out of range");
  const IoInfo& io = (*v)[i];
  if (dtype) *dtype = io.dt;
  if (rank) *rank = io.dims.size();
  if (dims) *dims = io.has_rank ? io.dims.data() : nullptr;
  if (onnx_type) *onnx_type = onnx_type_name(io.ot);
  return nullptr;
}
LT_API lt_error* lt_onnx_input_info(const lt_onnx_model* m, size_t i, lt_dtype* dtype, size_t* rank,
                                    const int64_t** dims, const char** onnx_type) {
  return io_info_c(m ? &m->inputs : nullptr, i, dtype, rank, dims, onnx_type);
}
LT_API lt_error* lt_onnx_output_info(const lt_onnx_model* m, size_t i, lt_dtype* dtype,
                                     size_t* rank, const int64_t** dims, const char** onnx_type) {
  return io_info_c(m ? &m->outputs : nullptr, i, dtype, rank, dims, onnx_type);
}

LT_API lt_error* lt_onnx_run(lt_onnx_model* m, const char* const* names, lt_tensor* const* inputs,
                             size_t n, lt_tensor** outputs) {
  if (!m || (n && (!names || !inputs)) || !outputs) {
    return lt_error_create(LT_STATUS_INVALID_ARGUMENT, "lt_onnx_run: null argument");
  }
  return guard([&] {
    std::vector<std::pair<std::string, lt::Tensor>> feeds;
    for (size_t i = 0; i < n; ++i) {
      if (!names[i])
        fail(LT_STATUS_INVALID_ARGUMENT,
             "lt_onnx_run: input name " + std::to_string(i) + " is null");
      feeds.emplace_back(names[i], lt::Tensor(inputs[i] ? lt_tensor_retain(inputs[i]) : nullptr));
    }
    std::vector<lt::Tensor> outs = run(*m, feeds);
    for (size_t i = 0; i < outs.size(); ++i) outputs[i] = outs[i].release();
  });
}

LT_API lt_error* lt_onnx_describe(const lt_onnx_model* m, char** out) {
  if (!m || !out)
    return lt_error_create(LT_STATUS_INVALID_ARGUMENT, "lt_onnx_describe: null argument");
  return guard([&] {
    std::string s = describe(m->m, m->path, &m->inputs, &m->outputs);
    *out = strdup(s.c_str());
  });
}

LT_API lt_error* lt_onnx_describe_file(const char* path, char** out) {
  if (!path || !out)
    return lt_error_create(LT_STATUS_INVALID_ARGUMENT, "lt_onnx_describe_file: null argument");
  return guard([&] {
    std::vector<uint8_t> bytes = read_whole_file(path, kMaxProtoBytes);
    ModelP m;
    try {
      m = parse_model(bytes.data(), bytes.size());
    } catch (const ParseError& e) {
      fail(LT_STATUS_IO_ERROR, std::string(path) + ": not a valid ONNX model: " + e.what());
    }
    std::vector<IoInfo> ins, outs;
    std::string notes;
    try {
      for (const ValueInfoP& v : m.graph.inputs) ins.push_back(io_info(v, path, "input"));
      for (const ValueInfoP& v : m.graph.outputs) outs.push_back(io_info(v, path, "output"));
    } catch (const std::exception& e) {
      notes = std::string("note: ") + e.what() + "\n";
      ins.clear();
      outs.clear();
    }
    std::string s = describe(m, path, notes.empty() ? &ins : nullptr, &outs) + notes;
    *out = strdup(s.c_str());
  });
}

}  // extern "C"
