/* lt_plugin.h — the backend plugin ABI: the one C function table a backend shared object
 * exports, and the plain-C graph and argument structs that cross it.
 *
 * Versioning
 * - LT_PLUGIN_ABI_MAJOR changes only when a struct or call changes incompatibly; the core
 *   refuses a plugin of another major and names both versions.
 * - LT_PLUGIN_ABI_MINOR grows when fields are APPENDED to a struct (never inserted,
 *   reordered or removed). The core loads a plugin of a lower minor version and never
 *   reads a field or calls a function pointer that the plugin's struct_size does not
 *   cover or that is NULL. A plugin reading an args struct from the core must likewise
 *   check args->struct_size before reading fields newer than its own header.
 * - Every table and argument struct starts with `size_t struct_size`, set by whoever fills
 *   it to the LT_*_STRUCT_SIZE macro of its header (offset of its last field + its size).
 *   lt_graph_node, lt_attr and lt_plugin_option are element structs: frozen for a major.
 *
 * Errors
 * - Every fallible call returns lt_plugin_error*: NULL = success, otherwise an error the
 *   plugin created and the core destroys with the table's error_destroy, after reading
 *   error_message / error_code. No C++ exception, abort() or exit() may leave a call.
 *
 * Ownership ("borrowed" = valid only during the call unless stated otherwise)
 * - Contexts, buffers and executables are created by the plugin and destroyed through it.
 * - Graphs, options, host pointers passed in are borrowed; copy what you keep.
 *
 * Threads
 * - The core may call any function of one context from several threads at once, except
 *   that it never frees a buffer or destroys an executable while another call uses it.
 *   Plugins must therefore make create-once state immutable or lock it.
 *
 * Discovery: the core opens lt_plugin_*.so files on the plugin path and calls the one
 * exported symbol LT_PLUGIN_ENTRY_SYMBOL. C11; includes only stddef.h/stdint.h. */
#ifndef LAZYTENSOR_LT_PLUGIN_H
#define LAZYTENSOR_LT_PLUGIN_H

#include "lazytensor/lt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LT_PLUGIN_ABI_MAJOR 1
#define LT_PLUGIN_ABI_MINOR 3

#define LT_PLUGIN_ENTRY_SYMBOL "lt_plugin_get_api"

#if defined(__GNUC__)
#define LT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define LT_PLUGIN_EXPORT
#endif

/* Size of `type` up to and including `last_field`. */
#define LT_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

typedef struct lt_plugin_error lt_plugin_error;           /* plugin-defined */
typedef struct lt_plugin_context lt_plugin_context;       /* plugin-defined */
typedef struct lt_plugin_buffer lt_plugin_buffer;         /* plugin-defined */
typedef struct lt_plugin_executable lt_plugin_executable; /* plugin-defined */

/* ---- graphs ------------------------------------------------------------------------ */

/* One node of a graph region. Element struct (frozen for the major version). The op is a
 * stable name from docs/ops.md ("add", "matmul", ...) or a custom op's name; the special
 * op "input" marks a leaf bound to an input buffer. dtype/shape describe the output.
 * Operands are indices of earlier nodes. Attributes as docs/ops.md lists them. */
typedef struct lt_graph_node {
  const char* op;
  lt_dtype dtype;
  size_t rank;
  const int64_t* shape;
  size_t num_operands;
  const int32_t* operands;
  size_t num_attrs;
  const lt_attr* attrs;
} lt_graph_node;

/* Dynamic dimensions (appended in 1.2). In a dynamic graph some numbers are affine functions
 * of symbols, one symbol per dynamic size (a batch, a sequence length): a dim of a node's shape,
 * or an entry of an INTS attribute that carries one (reshape's shape, a slice bound). The
 * graph's own shapes and attributes are those at `symbol_values`; each lt_dim_expr says that
 * one of those numbers is `scale * symbol + offset` at every value of its symbol. Numbers no
 * expression names are the same at every value. Element struct (frozen for the major). */
typedef struct lt_dim_expr {
  int32_t node;   /* node index */
  int32_t attr;   /* -1: dim `index` of the node's shape; else INTS attribute `attr` */
  int32_t index;  /* the dim, or the element of the INTS attribute */
  int32_t symbol; /* 0..num_symbols-1 */
  int64_t scale;  /* non-zero */
  int64_t offset;
} lt_dim_expr;

/* A graph region in topological order (operands precede users). All pointers are borrowed
 * for the duration of the call that receives the graph. Buffers are dense row-major. */
typedef struct lt_graph {
  size_t struct_size;
  size_t num_nodes;
  const lt_graph_node* nodes;
  size_t num_inputs;
  const int32_t* inputs; /* node index of input k (an "input" node), k = 0..num_inputs-1 */
  size_t num_outputs;
  const int32_t* outputs; /* node index of output k; a node may appear more than once */
  uint64_t hash;          /* the core's structural hash of this region */
  /* appended in 1.2: dynamic dimensions (num_symbols == 0: a static graph). Read them only
   * when struct_size covers them (LT_GRAPH_HAS_DYNAMIC). */
  size_t num_symbols;
  const int64_t* symbol_values; /* the values the graph's numbers are given at */
  size_t num_dim_exprs;
  const lt_dim_expr* dim_exprs;
} lt_graph;
#define LT_GRAPH_STRUCT_SIZE LT_STRUCT_SIZE(lt_graph, dim_exprs)
#define LT_GRAPH_STRUCT_SIZE_1_0 LT_STRUCT_SIZE(lt_graph, hash)
#define LT_GRAPH_HAS_DYNAMIC(g) ((g)->struct_size >= LT_GRAPH_STRUCT_SIZE && (g)->num_symbols > 0)

/* ---- argument structs -------------------------------------------------------------- */

/* A plugin option from the config ([plugins.<name>] table) as strings. */
typedef struct lt_plugin_option {
  const char* key;
  const char* value;
} lt_plugin_option;

/* Log levels match spdlog's: 0 trace, 1 debug, 2 info, 3 warn, 4 error. */
typedef void (*lt_plugin_log_fn)(void* user, int level, const char* message);

typedef struct lt_plugin_create_args {
  size_t struct_size;
  uint32_t core_abi_major; /* the core's LT_PLUGIN_ABI_MAJOR/MINOR */
  uint32_t core_abi_minor;
  size_t num_options;
  const lt_plugin_option* options; /* borrowed */
  lt_plugin_log_fn log;            /* may be NULL; callable from any thread */
  void* log_user;
  lt_plugin_context* context; /* out */
} lt_plugin_create_args;
#define LT_PLUGIN_CREATE_ARGS_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_create_args, context)

typedef struct lt_plugin_device_info_args {
  size_t struct_size;
  lt_plugin_context* context;
  size_t device; /* 0..device_count-1 */
  /* out; strings have the context's lifetime */
  const char* name;        /* short, e.g. "pocl-cpu" */
  const char* kind;        /* "cpu", "gpu", "tpu", "accelerator" */
  const char* description; /* one line: model, driver, memory, ... */
  uint64_t memory_bytes;   /* 0 if unknown */
  int host_addressable;    /* 1: buffer_host_ptr works for this device's buffers */
} lt_plugin_device_info_args;
#define LT_PLUGIN_DEVICE_INFO_ARGS_STRUCT_SIZE \
  LT_STRUCT_SIZE(lt_plugin_device_info_args, host_addressable)

typedef struct lt_plugin_buffer_args {
  size_t struct_size;
  lt_plugin_context* context;
  size_t device;
  size_t nbytes;            /* alloc: size; upload/download: bytes to copy */
  size_t offset;            /* upload/download: byte offset in the buffer */
  const void* src;          /* upload: host source (borrowed) */
  void* dst;                /* download: host destination (borrowed) */
  lt_plugin_buffer* buffer; /* alloc: out; others: in */
  void* host_ptr;           /* buffer_host_ptr: out, or NULL if not host-addressable */
} lt_plugin_buffer_args;
#define LT_PLUGIN_BUFFER_ARGS_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_buffer_args, host_ptr)

typedef struct lt_plugin_supports_args {
  size_t struct_size;
  lt_plugin_context* context;
  size_t device;
  const lt_graph* graph; /* borrowed; the node's operands are visible through it */
  size_t node;           /* index of the node asked about */
  int supported;         /* out: 1 if this backend can compile and run the node */
} lt_plugin_supports_args;
#define LT_PLUGIN_SUPPORTS_ARGS_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_supports_args, supported)

typedef struct lt_plugin_compile_args {
  size_t struct_size;
  lt_plugin_context* context;
  size_t device;
  const lt_graph* graph;            /* borrowed: copy what the executable needs */
  lt_plugin_executable* executable; /* out */
  /* appended in 1.2 (out, the core sets 0): for a dynamic graph, 1 if the executable runs the
   * graph at every value of its symbols (execute then passes them); left 0, the executable
   * runs the graph at its own symbol_values only, and the core pads to buckets instead. */
  int dynamic;
  /* appended in 1.3, buffer donation (docs/memory.md). donor_inputs (in, borrowed for the
   * call; NULL when the core offers none): per output k of the graph, the position of a graph
   * input of the same byte size whose buffer the core may pass, at execute, as output k's
   * buffer too (the input's last reader is this executable), or -1. donation_accepted (out,
   * num_outputs entries the core zeroes; NULL exactly when donor_inputs is): set entry k to 1
   * when the executable computes the right output k with that buffer shared, reading nothing
   * of the input after writing output k; whether a run shares it or passes two buffers is the
   * core's choice per run, so the executable must be right both ways. A plugin that leaves
   * every entry 0 (every plugin of minor < 3) always gets distinct buffers. */
  const int64_t* donor_inputs;
  uint8_t* donation_accepted;
} lt_plugin_compile_args;
#define LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_compile_args, donation_accepted)
/* The 1.2 size: what a plugin of minor 2 checks compile args against. */
#define LT_PLUGIN_COMPILE_ARGS_STRUCT_SIZE_1_2 LT_STRUCT_SIZE(lt_plugin_compile_args, dynamic)

/* Receives one span of an execution (ABI 1.3): a kernel or host step the executable ran, its
 * `name` (borrowed for the call: "matmul", "k3 add+mul+exp"), its start and end in nanoseconds
 * of CLOCK_MONOTONIC (std::chrono::steady_clock on Linux). */
typedef void (*lt_plugin_span_fn)(void* user, const char* name, int64_t start_ns, int64_t end_ns);

/* Inputs and outputs are buffers of this plugin on the executable's device, each at least
 * as large as its graph node needs (the core's caching allocator rounds sizes up to a size
 * class; read and write only the node's numel * dtype size bytes). The core allocates
 * outputs. Outputs never alias each other, and never alias inputs except that output k may
 * be the very buffer of input donor_inputs[k] when compile accepted that donation (1.3). */
typedef struct lt_plugin_execute_args {
  size_t struct_size;
  lt_plugin_context* context;
  lt_plugin_executable* executable;
  size_t num_inputs;
  lt_plugin_buffer* const* inputs;
  size_t num_outputs;
  lt_plugin_buffer* const* outputs;
  /* appended in 1.2: for an executable compiled dynamic, the symbol values of this run (every
   * shape and attribute at these values; buffers sized for them); else 0 / NULL. */
  size_t num_symbols;
  const int64_t* symbol_values;
  /* appended in 1.3 (optional): per-kernel profiling. The core sets `span` while it profiles
   * (LT_PROFILE), else NULL. An executable may then call it once per kernel or host step, on
   * the thread that called execute and before execute returns; the core shows the spans as
   * children of the region's execution. A plugin that never calls it is profiled as a whole
   * executable. Read only when struct_size covers the field (an older core's args do not). */
  lt_plugin_span_fn span;
  void* span_user; /* passed back to span */
} lt_plugin_execute_args;
#define LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_execute_args, span_user)
/* The 1.2 layout (through symbol_values): the least a plugin of 1.3 accepts from a core. */
#define LT_PLUGIN_EXECUTE_ARGS_STRUCT_SIZE_1_2 LT_STRUCT_SIZE(lt_plugin_execute_args, symbol_values)

/* Receives one named statistic: "kernels", "compile_ms", "simulated_ns", ... */
typedef void (*lt_plugin_stat_fn)(void* user, const char* name, double value);

typedef struct lt_plugin_stats_args {
  size_t struct_size;
  lt_plugin_context* context;
  lt_plugin_executable* executable; /* NULL: context-wide stats */
  lt_plugin_stat_fn emit;
  void* user;
} lt_plugin_stats_args;
#define LT_PLUGIN_STATS_ARGS_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_stats_args, user)

/* ---- the function table ------------------------------------------------------------ */

typedef struct lt_plugin_api {
  size_t struct_size;
  uint32_t abi_major; /* LT_PLUGIN_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;
  const char* name;    /* backend name, [a-z0-9_]+, e.g. "cpu_jit"; static */
  const char* version; /* the plugin's own version string; static */

  /* errors (required) */
  const char* (*error_message)(const lt_plugin_error* error);
  lt_status_code (*error_code)(const lt_plugin_error* error);
  void (*error_destroy)(lt_plugin_error* error);

  /* lifecycle (required) */
  lt_plugin_error* (*create)(lt_plugin_create_args* args);
  void (*destroy)(lt_plugin_context* context);

  /* devices (required): device_count reports 1 to 1024 (the core refuses other counts) */
  lt_plugin_error* (*device_count)(lt_plugin_context* context, size_t* out);
  lt_plugin_error* (*device_info)(lt_plugin_device_info_args* args);

  /* buffers (required except buffer_host_ptr) */
  lt_plugin_error* (*buffer_alloc)(lt_plugin_buffer_args* args);
  void (*buffer_free)(lt_plugin_context* context, lt_plugin_buffer* buffer);
  lt_plugin_error* (*buffer_upload)(lt_plugin_buffer_args* args);
  lt_plugin_error* (*buffer_download)(lt_plugin_buffer_args* args);
  lt_plugin_error* (*buffer_host_ptr)(lt_plugin_buffer_args* args);

  /* graphs (required except stats) */
  lt_plugin_error* (*supports)(lt_plugin_supports_args* args);
  lt_plugin_error* (*compile)(lt_plugin_compile_args* args);
  lt_plugin_error* (*execute)(lt_plugin_execute_args* args);
  void (*executable_destroy)(lt_plugin_context* context, lt_plugin_executable* executable);
  lt_plugin_error* (*stats)(lt_plugin_stats_args* args);

  /* appended in 1.1 (optional): zero-copy import of host memory (DLPack). Wraps the
   * `nbytes` bytes at `host_ptr` (in, borrowed until buffer_free) as a buffer of `device`,
   * without copying, and writes it to `buffer`; or leaves `buffer` NULL (not an error) when
   * this device cannot use that memory (not host-addressable, misaligned), and the core then
   * copies. The core only reads a wrapped buffer (it is an input, never an output) and
   * frees it with buffer_free, which must release the plugin's handle and never the memory. */
  lt_plugin_error* (*buffer_wrap_host)(lt_plugin_buffer_args* args);
} lt_plugin_api;
#define LT_PLUGIN_API_STRUCT_SIZE LT_STRUCT_SIZE(lt_plugin_api, buffer_wrap_host)

/* The one symbol a plugin exports. Returns a table with static lifetime. */
typedef const lt_plugin_api* (*lt_plugin_get_api_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LAZYTENSOR_LT_PLUGIN_H */
