/* lt.h — LazyTensor application C API: runtime, devices, lazy tensors, ops, sync, metrics.
 *
 * Every op only records a node of a lazy graph; values are computed when read
 * (lt_tensor_to_host, lt_tensor_materialize) or when lt_sync materialises everything
 * pending on a device as one graph. Compiled graphs are cached by structure.
 *
 * Conventions
 * - Fallible calls return lt_error*: NULL on success; otherwise an error the caller owns
 *   and frees with lt_error_destroy. On error no output parameter is written.
 * - Handles are opaque. lt_runtime and lt_tensor are owned by the caller; lt_device is
 *   borrowed from its runtime and valid as long as any handle of that runtime lives.
 * - Shapes are arrays of int64_t dims, row-major (C order), `rank` entries; rank 0 is a
 *   scalar. Host data is dense row-major with no padding.
 * - Op semantics, attribute names and dtype rules: docs/ops.md.
 * - Thread safety: a runtime may be used from many threads at once; each lt_tensor
 *   handle must be used by one thread at a time (see docs/threads.md).
 * C11; includes only <stddef.h> and <stdint.h>. */
#ifndef LAZYTENSOR_LT_H
#define LAZYTENSOR_LT_H

#include "lazytensor/lt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define LT_API __declspec(dllimport)
#elif defined(__GNUC__)
#define LT_API __attribute__((visibility("default")))
#else
#define LT_API
#endif

/* Library version: LT_VERSION_MAJOR changes on incompatible C API changes. */
#define LT_VERSION_MAJOR 0
#define LT_VERSION_MINOR 1
#define LT_VERSION_PATCH 0

typedef struct lt_error lt_error;
typedef struct lt_runtime lt_runtime;
typedef struct lt_device lt_device;
typedef struct lt_tensor lt_tensor;

/* ---- version and errors ------------------------------------------------------------ */

/* "MAJOR.MINOR.PATCH" of the loaded library; static storage. */
LT_API const char* lt_version_string(void);
/* (MAJOR << 16) | (MINOR << 8) | PATCH of the loaded library. */
LT_API uint32_t lt_version(void);

/* Message of an error, e.g. "add: shapes [2,3] and [4] do not broadcast". Lives as
 * long as the error. */
LT_API const char* lt_error_message(const lt_error* error);
LT_API lt_status_code lt_error_code(const lt_error* error);
/* The code's name without the prefix ("INVALID_ARGUMENT" for LT_STATUS_INVALID_ARGUMENT),
 * static storage; "UNKNOWN" for a value that is not an lt_status_code. */
LT_API const char* lt_status_name(lt_status_code code);
/* Frees an error; NULL is ignored. */
LT_API void lt_error_destroy(lt_error* error);

/* Source locations: the next op this thread records keeps `file` and `line` (the user's
 * program), shown in recompile reasons, fallback warnings and graph dumps ("traced at
 * train.c:57"). `file` must have static storage duration (a __FILE__ literal). LT_AT wraps
 * one op call: LT_AT(lt_add(a, b, &c)). The C++ API passes std::source_location itself. */
LT_API void lt_trace_location(const char* file, uint32_t line);
#define LT_AT(call) (lt_trace_location(__FILE__, (uint32_t)__LINE__), (call))
/* Where the op that made `tensor` was traced: 1 and *file, *line when known, else 0. */
LT_API int lt_tensor_traced_at(const lt_tensor* tensor, const char** file, uint32_t* line);

/* Frees a string returned by this library (lt_metrics_report, ...); NULL is ignored. */
LT_API void lt_string_free(char* s);

/* ---- runtime ----------------------------------------------------------------------- */

/* Options for lt_runtime_create. Zero-initialise, set struct_size to
 * LT_RUNTIME_OPTIONS_STRUCT_SIZE, set what you need: NULL fields mean "from the
 * config file / environment / default", in that order of precedence:
 * explicit field > environment variable > config file > built-in default. */
typedef struct lt_runtime_options {
  size_t struct_size;
  const char* config_path;    /* TOML or JSON file; else $LT_CONFIG; else none */
  const char* device;         /* "cpu_jit", "cpu_jit:0"; else $LT_DEVICE; else config;
                                 else the first of cpu_jit, gpu_opencl, tpu_sim, cpu_eager
                                 that loaded */
  const char* plugin_path;    /* ':'-separated directories; else $LT_PLUGIN_PATH, config,
                                 and always the install plugin directory */
  const char* fallback;       /* "silent" | "warn" | "error"; else $LT_FALLBACK; else "warn" */
  const char* log_level;      /* "trace".."off"; else $LT_LOG_LEVEL; else "warn" */
  const char* dump_dir;       /* where compiled graphs are dumped; else $LT_DUMP_DIR */
  const char* dynamic_shapes; /* "auto" | "marked" | "off"; else $LT_DYNAMIC_SHAPES; else
                                 config; else "auto" (docs/dynamic-shapes.md) */
  const char* optimize;       /* graph optimiser "none" | "exact" | "fast"; else $LT_OPTIMIZE;
                                 else config; else "exact" (docs/optimizer.md). Appended: a
                                 caller whose struct_size ends before it gets the default */
} lt_runtime_options;
#define LT_RUNTIME_OPTIONS_STRUCT_SIZE \
  (offsetof(lt_runtime_options, optimize) + sizeof(const char*))

/* Creates a runtime: reads config, loads plugins, creates devices. `options` may be NULL.
 * Plugins that fail to load are reported in lt_runtime_plugin_report and skipped; the
 * call fails only when no usable device remains or the requested device is missing. */
LT_API lt_error* lt_runtime_create(const lt_runtime_options* options, lt_runtime** out);
/* Drops the application's reference; tensors still alive keep the runtime's internals
 * alive until they are freed. NULL is ignored. */
LT_API void lt_runtime_destroy(lt_runtime* runtime);

/* Text report of plugin search paths, plugins loaded (name, version, ABI, devices, ops)
 * and plugins that failed (path and reason). Caller frees with lt_string_free. */
LT_API lt_error* lt_runtime_plugin_report(lt_runtime* runtime, int json, char** out);

/* ---- devices ----------------------------------------------------------------------- */

LT_API size_t lt_runtime_device_count(const lt_runtime* runtime);
/* Borrowed; NULL if index is out of range. */
LT_API lt_device* lt_runtime_device(lt_runtime* runtime, size_t index);
/* The configured default device. Borrowed, never NULL for a created runtime. */
LT_API lt_device* lt_runtime_default_device(lt_runtime* runtime);
/* Finds "backend" (its first device) or "backend:index". */
LT_API lt_error* lt_runtime_find_device(lt_runtime* runtime, const char* name, lt_device** out);
/* "cpu_eager:0" — static for the device's lifetime. */
LT_API const char* lt_device_name(const lt_device* device);
/* Backend (plugin) name, "cpu_eager". */
LT_API const char* lt_device_backend(const lt_device* device);
LT_API lt_runtime* lt_device_runtime(const lt_device* device);

/* ---- tensors ----------------------------------------------------------------------- */

/* Copies `nbytes` of dense row-major host data (must equal numel * dtype size) into a
 * new device tensor. `data` may be NULL only when numel is 0. */
LT_API lt_error* lt_tensor_from_host(lt_device* device, lt_dtype dtype, const int64_t* shape,
                                     size_t rank, const void* data, size_t nbytes, lt_tensor** out);
/* A rank-0 tensor holding `value` converted to dtype. Scalars are graph *parameters*:
 * changing the value between steps does not recompile. */
LT_API lt_error* lt_scalar(lt_device* device, lt_dtype dtype, double value, lt_tensor** out);

/* Materialises the tensor and copies it out; nbytes must equal numel * dtype size. */
LT_API lt_error* lt_tensor_to_host(lt_tensor* tensor, void* data, size_t nbytes);
/* Materialises the tensor (and what it depends on) without copying it out. */
LT_API lt_error* lt_tensor_materialize(lt_tensor* tensor);

/* Another handle to the same value (reference count + 1). Free each with lt_tensor_free. */
LT_API lt_tensor* lt_tensor_retain(lt_tensor* tensor);
/* Releases one handle; the value and its graph are freed with the last one. NULL ignored.
 * A handle used after its last free is detected: entry points that return lt_error* fail with
 * LT_STATUS_INVALID_ARGUMENT naming the handle, the accessors below answer as for NULL, and a
 * second free is ignored. (Freed slots are reused only after thousands of later frees, so a
 * handle kept far longer than that may alias a new tensor: do not rely on it as a feature.) */
LT_API void lt_tensor_free(lt_tensor* tensor);

LT_API lt_dtype lt_tensor_dtype(const lt_tensor* tensor);
LT_API size_t lt_tensor_rank(const lt_tensor* tensor);
/* Borrowed array of rank dims; valid as long as the handle. */
LT_API const int64_t* lt_tensor_shape(const lt_tensor* tensor);
LT_API int64_t lt_tensor_numel(const lt_tensor* tensor);
LT_API lt_device* lt_tensor_device(const lt_tensor* tensor);
/* 1 if the tensor holds a computed buffer, 0 if it is still a pending graph node. */
LT_API int lt_tensor_is_materialized(const lt_tensor* tensor);
/* Names the tensor's value (copied; NULL or "" clears it). The name is for people: recompile
 * reasons name an input by it ("input 3 'x' dim 0: 32 -> 24"); it never changes the graph's
 * hash. lt_tensor_name returns it, borrowed until the next set, or "" when unnamed. */
LT_API lt_error* lt_tensor_set_name(lt_tensor* tensor, const char* name);
LT_API const char* lt_tensor_name(const lt_tensor* tensor);
/* Dynamic shapes (docs/dynamic-shapes.md): marks dim `dim` (< 32) of the tensor's value.
 * dynamic = 1: the dim may become dynamic when the program comes back at another size, also
 * under the config dynamic_shapes = "marked"; dynamic = 0: it never does (a new size of it
 * compiles static). Marks are read when the tensor is a graph input; never hashed. */
LT_API lt_error* lt_tensor_mark_dynamic(lt_tensor* tensor, size_t dim, int dynamic);

/* Copies the tensor to another device (lazy on the source side: materialises it first). */
LT_API lt_error* lt_tensor_to_device(lt_tensor* tensor, lt_device* device, lt_tensor** out);

/* ---- sync -------------------------------------------------------------------------- */

/* Materialises every live pending tensor of `device` as ONE graph (a training loop's
 * "mark step"). Afterwards they hold buffers and their graphs are dropped. */
LT_API lt_error* lt_sync(lt_device* device);

/* ---- ops --------------------------------------------------------------------------- */

/* Records op `op` (a name from docs/ops.md or a registered custom op) on the inputs.
 * `device` is required when num_inputs is 0 and ignored otherwise (inputs must share one
 * device). Dtypes of numeric operands are promoted (bool < i32 < i64 < f32 < f64) and
 * shapes broadcast as the op's rules say; the error names the op and the offending
 * shapes or dtypes. */
LT_API lt_error* lt_apply(lt_device* device, const char* op, lt_tensor* const* inputs,
                          size_t num_inputs, const lt_attr* attrs, size_t num_attrs,
                          lt_tensor** out);

/* The elementwise unary and binary ops and matmul: one function per UNARY / BINARY row of
 * lazytensor/lt_ops.def, unary `lt_<op>(a, out)` (lt_neg, lt_exp, ..., lt_not) and binary
 * `lt_<op>(a, b, out)` (lt_add, ..., lt_and, lt_or, lt_matmul). Binary ops broadcast with
 * NumPy's rules; comparisons (eq ne lt le gt ge) return bool; and/or/not take bool; matmul
 * has NumPy semantics (1-D operands are promoted and squeezed, batch dims broadcast). The
 * dtypes each op accepts: the row's `dtypes` column and docs/ops.md. */
#define LT_CAPI_UNARY(fn) LT_API lt_error* fn(lt_tensor* a, lt_tensor** out);
#define LT_CAPI_BINARY(fn) LT_API lt_error* fn(lt_tensor* a, lt_tensor* b, lt_tensor** out);
#define LT_CAPI_CALL(fn)
#define LT_CAPI_NONE(fn)
#define LT_OP(Camel, name, capi, cfn, ...) LT_CAPI_##capi(cfn)
#include "lazytensor/lt_ops.def"
#undef LT_OP
#undef LT_CAPI_UNARY
#undef LT_CAPI_BINARY
#undef LT_CAPI_CALL
#undef LT_CAPI_NONE

/* cond ? a : b, broadcasting all three; cond must be bool. */
LT_API lt_error* lt_where(lt_tensor* cond, lt_tensor* a, lt_tensor* b, lt_tensor** out);
LT_API lt_error* lt_cast(lt_tensor* a, lt_dtype dtype, lt_tensor** out);

/* Creation. */
LT_API lt_error* lt_full(lt_device* device, const int64_t* shape, size_t rank, double value,
                         lt_dtype dtype, lt_tensor** out);
/* [start, stop) by step (step != 0), length ceil((stop - start) / step). */
LT_API lt_error* lt_arange(lt_device* device, double start, double stop, double step,
                           lt_dtype dtype, lt_tensor** out);
/* Counter-based (lt_random.h): the same seed gives the same values on every backend.
 * The seed is a graph parameter: a new seed per step does not recompile. */
LT_API lt_error* lt_random_uniform(lt_device* device, const int64_t* shape, size_t rank,
                                   uint64_t seed, double low, double high, lt_dtype dtype,
                                   lt_tensor** out);
LT_API lt_error* lt_random_normal(lt_device* device, const int64_t* shape, size_t rank,
                                  uint64_t seed, double mean, double stddev, lt_dtype dtype,
                                  lt_tensor** out);

/* Reductions over `axes` (negative counts from the end; num_axes 0 = all axes). */
LT_API lt_error* lt_sum(lt_tensor* a, const int64_t* axes, size_t num_axes, int keepdims,
                        lt_tensor** out);
LT_API lt_error* lt_mean(lt_tensor* a, const int64_t* axes, size_t num_axes, int keepdims,
                         lt_tensor** out);
LT_API lt_error* lt_max(lt_tensor* a, const int64_t* axes, size_t num_axes, int keepdims,
                        lt_tensor** out);
LT_API lt_error* lt_min(lt_tensor* a, const int64_t* axes, size_t num_axes, int keepdims,
                        lt_tensor** out);
/* Index (i64) of the first maximum along `axis`. */
LT_API lt_error* lt_argmax(lt_tensor* a, int64_t axis, int keepdims, lt_tensor** out);

/* Layout. One dim of a reshape may be -1. */
LT_API lt_error* lt_reshape(lt_tensor* a, const int64_t* shape, size_t rank, lt_tensor** out);
LT_API lt_error* lt_permute(lt_tensor* a, const int64_t* perm, size_t rank, lt_tensor** out);
LT_API lt_error* lt_broadcast_to(lt_tensor* a, const int64_t* shape, size_t rank, lt_tensor** out);
/* Python slicing per axis (rank entries each): negative start/stop count from the end and
 * are clamped; step != 0 (negative steps reverse). */
LT_API lt_error* lt_slice(lt_tensor* a, const int64_t* starts, const int64_t* stops,
                          const int64_t* steps, size_t rank, lt_tensor** out);
LT_API lt_error* lt_concat(lt_tensor* const* inputs, size_t num_inputs, int64_t axis,
                           lt_tensor** out);
/* Constant padding: before/after per axis (rank entries each, >= 0). */
LT_API lt_error* lt_pad(lt_tensor* a, const int64_t* before, const int64_t* after, size_t rank,
                        double value, lt_tensor** out);
/* np.take(a, indices, axis): out shape a.shape[:axis] + indices.shape + a.shape[axis+1:].
 * indices are i32/i64; out-of-range indices are clamped to [0, dim-1]. */
LT_API lt_error* lt_gather(lt_tensor* a, lt_tensor* indices, int64_t axis, lt_tensor** out);
/* a with `updates` added at `indices` along axis (the adjoint of gather); updates has
 * gather's output shape; updates at out-of-range indices are dropped. */
LT_API lt_error* lt_scatter_add(lt_tensor* a, lt_tensor* indices, lt_tensor* updates, int64_t axis,
                                lt_tensor** out);

/* nn. x: [N, C, H, W]; weight: [O, C/groups, KH, KW]; bias: [O] or NULL.
 * stride, padding, dilation: 2 entries each (H, W). */
LT_API lt_error* lt_conv2d(lt_tensor* x, lt_tensor* weight, lt_tensor* bias, const int64_t* stride,
                           const int64_t* padding, const int64_t* dilation, int64_t groups,
                           lt_tensor** out);
/* kernel, stride, padding: 2 entries each. max pads with -inf; avg divides by the full
 * kernel area (padding counts as zeros). */
LT_API lt_error* lt_max_pool2d(lt_tensor* x, const int64_t* kernel, const int64_t* stride,
                               const int64_t* padding, lt_tensor** out);
LT_API lt_error* lt_avg_pool2d(lt_tensor* x, const int64_t* kernel, const int64_t* stride,
                               const int64_t* padding, lt_tensor** out);
LT_API lt_error* lt_softmax(lt_tensor* a, int64_t axis, lt_tensor** out);
LT_API lt_error* lt_log_softmax(lt_tensor* a, int64_t axis, lt_tensor** out);

/* ---- metrics ----------------------------------------------------------------------- */

/* The metrics report as text (json = 0) or JSON (json = 1): traced ops, graphs, cache
 * hits/misses, compile/execute time, fallbacks per op, host<->device bytes, allocator
 * size and hit rate, recompilation reasons, plugin stats. Free with lt_string_free. */
LT_API lt_error* lt_metrics_report(lt_runtime* runtime, int json, char** out);
/* One metric by name (names as in the JSON report, e.g. "cache_hits", "compiles",
 * "fallback.gelu", "plugin.cpu_jit.kernels"); NOT_FOUND if it does not exist. */
LT_API lt_error* lt_metric_get(lt_runtime* runtime, const char* name, double* out);
/* Zeroes every counter (the compile cache itself is kept). */
LT_API void lt_metrics_reset(lt_runtime* runtime);

/* ---- autograd ---------------------------------------------------------------------- */

/* Reverse-mode automatic differentiation, recorded as ops are applied and replayed as more
 * lazy ops: the backward pass is itself a lazy graph, so it is compiled, fused and cached
 * together with the forward pass and the optimizer update (one lt_sync per step).
 *
 * - Only float tensors (f32, f64) can require gradients. An op's output requires gradients
 *   when any float input does and no no-grad scope is open on the calling thread.
 * - Gradients accumulate (add) into leaf tensors across lt_backward calls until
 *   lt_tensor_zero_grad.
 * - lt_backward frees the recorded graph it walked (like PyTorch's default): a second
 *   lt_backward through the same ops is an error; run the forward pass again.
 * - The autograd state of a value is dropped when its last handle is freed.
 * Every gradient rule uses only ops of docs/ops.md, so every backend runs the backward. */

/* Marks a tensor (a leaf: not the output of a recorded op) as needing gradients (1) or
 * not (0). Errors: non-float dtype; clearing it on a non-leaf (use lt_tensor_detach). */
LT_API lt_error* lt_tensor_set_requires_grad(lt_tensor* tensor, int requires_grad);
/* 1 if the tensor requires gradients (set on a leaf or inherited through ops), else 0. */
LT_API int lt_tensor_requires_grad(const lt_tensor* tensor);

/* Back-propagates from `loss` into every leaf that requires gradients, accumulating into
 * their gradients. `seed` is d(result)/d(loss), loss's shape; may be NULL only when loss
 * has one element (the seed is then 1). Errors: loss does not require gradients, a
 * non-scalar loss without seed, a seed of another shape, an op without gradient rule. */
LT_API lt_error* lt_backward(lt_tensor* loss, lt_tensor* seed);

/* The gradient accumulated in a leaf: a new handle (free it), or *out = NULL (success)
 * when none has been accumulated since the last lt_tensor_zero_grad. */
LT_API lt_error* lt_tensor_grad(lt_tensor* tensor, lt_tensor** out);
/* Drops the accumulated gradient (the next lt_backward starts from none). */
LT_API lt_error* lt_tensor_zero_grad(lt_tensor* tensor);
/* Replaces the accumulated gradient of a leaf that requires gradients with `grad` (a new
 * reference is taken; the caller keeps its own), e.g. a clipped gradient; NULL drops it like
 * lt_tensor_zero_grad. `grad` must have the tensor's device, dtype and shape and must not
 * require gradients itself (compute it in a no-grad scope or detach it). */
LT_API lt_error* lt_tensor_set_grad(lt_tensor* tensor, lt_tensor* grad);

/* Functional form: d(sum_k seeds[k] . outputs[k]) / d(inputs[j]) into grads[j] (new
 * handles, caller frees). Nothing is accumulated into leaves and the recorded graph is
 * kept. `seeds` may be NULL, and so may each seeds[k] when outputs[k] has one element.
 * An input that no output depends on gets zeros of its shape. */
LT_API lt_error* lt_grad(lt_tensor* const* outputs, lt_tensor* const* seeds, size_t num_outputs,
                         lt_tensor* const* inputs, size_t num_inputs, lt_tensor** grads);

/* A new handle on the same values that does not require gradients and has no history. */
LT_API lt_error* lt_tensor_detach(lt_tensor* tensor, lt_tensor** out);

/* No-grad scopes (nestable, per thread): while one is open, ops record no history. */
LT_API void lt_no_grad_begin(void);
/* Closes the innermost no-grad scope of the calling thread; extra calls are ignored. */
LT_API void lt_no_grad_end(void);

/* Rematerialisation (activation checkpointing, docs/memory.md). Ops recorded on the calling
 * thread between lt_recompute_begin and the matching lt_recompute_end form one recompute
 * region: the backward pass (lt_backward, lt_grad) recomputes each value the region computed
 * from the region's inputs, right where a gradient rule needs it, instead of reading the
 * forward's value, so the forward's values inside the region die early. Recomputed nodes carry
 * the region's nonzero recompute tag, which the optimiser's CSE respects (it never merges a
 * recomputation into the forward). Results are the same values; values with no recorded
 * history (random masks, inputs) are read, not recomputed. Nested regions join the outermost;
 * extra lt_recompute_end calls are ignored. */
LT_API void lt_recompute_begin(void);
LT_API void lt_recompute_end(void);

/* ---- custom ops (appended in 0.1 by the SDK) ----------------------------------------- */

/* An application or plugin adds an op at run time: a name, a shape/dtype inference callback,
 * a CPU kernel over host buffers and optionally a gradient. The op is then recorded like any
 * other (lt_apply with its name) and crosses the plugin ABI by that name: a backend that
 * knows it claims it in supports(); on every other backend the core runs the CPU kernel on
 * host copies of the operands (counted as fallback.<name>, subject to the fallback policy).
 * Registration is process-wide and permanent; names must not clash with any op. */

#define LT_CUSTOM_OP_MAX_RANK 64

/* One operand (or, for the kernel, the output) as the callbacks see it. Borrowed. */
typedef struct lt_custom_op_tensor {
  lt_dtype dtype;
  size_t rank;
  const int64_t* shape;
  const void* data; /* kernel: dense row-major host data; inference: NULL */
} lt_custom_op_tensor;

/* Arguments of both callbacks. Everything is borrowed for the duration of the call. */
typedef struct lt_custom_op_args {
  size_t struct_size;
  void* user; /* lt_custom_op_def.user */
  size_t num_inputs;
  const lt_custom_op_tensor* inputs;
  size_t num_attrs;
  const lt_attr* attrs;
  /* inference: set out_dtype, out_rank (<= LT_CUSTOM_OP_MAX_RANK) and out_shape[0..rank).
   * kernel: these describe the output, and out_data (out_nbytes bytes) is to be filled. */
  lt_dtype out_dtype;
  size_t out_rank;
  int64_t* out_shape; /* core-owned array of LT_CUSTOM_OP_MAX_RANK entries */
  void* out_data;     /* kernel only; NULL during inference */
  size_t out_nbytes;
  /* On failure write a NUL-terminated message here (error_size bytes incl. the NUL). */
  char* error;
  size_t error_size;
} lt_custom_op_args;
#define LT_CUSTOM_OP_ARGS_STRUCT_SIZE (offsetof(lt_custom_op_args, error_size) + sizeof(size_t))

/* Returns LT_STATUS_OK, or the category of the failure (e.g. LT_STATUS_SHAPE_MISMATCH) with a
 * message in args->error. Must not throw (C++), abort or exit; may run on any thread. */
typedef lt_status_code (*lt_custom_op_fn)(lt_custom_op_args* args);

/* Gradient: given the op's inputs, output and the output's gradient (lazy tensors, borrowed),
 * writes new handles to grad_inputs[i] (or leaves NULL where an input gets no gradient),
 * built with lt_apply and other lt.h ops so the backward pass stays lazy. */
typedef lt_error* (*lt_custom_grad_fn)(void* user, lt_tensor* const* inputs, size_t num_inputs,
                                       lt_tensor* output, lt_tensor* grad_output,
                                       const lt_attr* attrs, size_t num_attrs,
                                       lt_tensor** grad_inputs);

typedef struct lt_custom_op_def {
  size_t struct_size;
  const char* name; /* [a-z0-9_.]+, not an existing op; copied */
  size_t min_inputs;
  size_t max_inputs;
  const char* const* attr_names; /* accepted attribute names (copied); may be NULL if none */
  size_t num_attr_names;
  lt_custom_op_fn infer;      /* required */
  lt_custom_op_fn cpu_kernel; /* required */
  lt_custom_grad_fn grad;     /* optional: NULL = not differentiable */
  void* user;                 /* passed to every callback; must outlive the process's use */
} lt_custom_op_def;
#define LT_CUSTOM_OP_DEF_STRUCT_SIZE (offsetof(lt_custom_op_def, user) + sizeof(void*))

/* Registers a custom op. Errors: NULL/invalid fields, a name already taken. */
LT_API lt_error* lt_register_custom_op(const lt_custom_op_def* def);

/* A new error (for callbacks such as lt_custom_grad_fn that return lt_error*); the message
 * is copied. The receiver frees it with lt_error_destroy. */
LT_API lt_error* lt_error_create(lt_status_code code, const char* message);

/* ---- checkpoints (appended in 0.1) ------------------------------------------------------ */

/* Tensors saved to and loaded from files in the safetensors format (docs/checkpoints.md):
 * an 8-byte little-endian header length, a JSON header naming each tensor's dtype
 * ("F32" "F64" "I32" "I64" "BOOL" "BF16" "F16"), shape and byte range, then the raw
 * little-endian data. Files written by other safetensors writers load as long as every
 * tensor has one of these dtypes. File errors are LT_STATUS_IO_ERROR (LT_STATUS_NOT_FOUND
 * for a missing file, LT_STATUS_UNSUPPORTED for a safetensors dtype LazyTensor lacks, such
 * as U8) with a message naming the file and, where it applies, the tensor. */

typedef struct lt_checkpoint lt_checkpoint;

/* Writes `count` tensors under `names` (non-empty, distinct, not "__metadata__", valid
 * UTF-8) plus `num_metadata` string pairs (distinct keys) to `path`. The tensors are
 * materialised first. The file is written to a temporary file in the same directory, flushed
 * to disk and renamed over `path`: a crash leaves either the old file or the new one, never
 * a partial one. names/tensors may be NULL when count is 0; meta_keys/meta_values when
 * num_metadata is 0. */
LT_API lt_error* lt_checkpoint_save(const char* path, size_t count, const char* const* names,
                                    lt_tensor* const* tensors, size_t num_metadata,
                                    const char* const* meta_keys, const char* const* meta_values);

/* Opens and validates a checkpoint: the header length against the file size, the JSON, and
 * for every tensor a supported dtype, a shape whose byte size equals its byte range, and
 * byte ranges that are in bounds, do not overlap and cover the data exactly. Tensor data is
 * read only by lt_checkpoint_tensor. Free the handle with lt_checkpoint_close. A handle is
 * immutable: it may be used from several threads at once. */
LT_API lt_error* lt_checkpoint_open(const char* path, lt_checkpoint** out);
/* Closes the file and frees the handle; every string and shape it returned dies with it.
 * NULL is ignored. */
LT_API void lt_checkpoint_close(lt_checkpoint* checkpoint);

/* Number of tensors; 0 for NULL. */
LT_API size_t lt_checkpoint_count(const lt_checkpoint* checkpoint);
/* Name of tensor `index` (tensors are ordered by their position in the file); NULL when out
 * of range. Borrowed: valid until lt_checkpoint_close. */
LT_API const char* lt_checkpoint_name(const lt_checkpoint* checkpoint, size_t index);
/* Dtype, rank and shape (a borrowed array of rank dims, valid until lt_checkpoint_close) of
 * tensor `name`. Any output pointer may be NULL. NOT_FOUND when there is no such tensor. */
LT_API lt_error* lt_checkpoint_info(const lt_checkpoint* checkpoint, const char* name,
                                    lt_dtype* dtype, size_t* rank, const int64_t** shape);
/* Reads tensor `name` into a new tensor on `device` (caller frees). NOT_FOUND when there is
 * no such tensor; IO_ERROR when reading fails or a BOOL element is not 0 or 1. */
LT_API lt_error* lt_checkpoint_tensor(const lt_checkpoint* checkpoint, const char* name,
                                      lt_device* device, lt_tensor** out);

/* The "__metadata__" string pairs: their number, and key `index` (sorted by key; NULL when
 * out of range). */
LT_API size_t lt_checkpoint_metadata_count(const lt_checkpoint* checkpoint);
LT_API const char* lt_checkpoint_metadata_key(const lt_checkpoint* checkpoint, size_t index);
/* The metadata value of `key`, or NULL when absent. Borrowed: valid until
 * lt_checkpoint_close. */
LT_API const char* lt_checkpoint_metadata(const lt_checkpoint* checkpoint, const char* key);

/* ---- DLPack (appended in 0.1) ----------------------------------------------------------- */

/* Zero-copy exchange with other libraries through DLPack 0.6 (dlpack.h; include
 * <dlpack/dlpack.h> to read the struct). Both directions speak host memory (kDLCPU): on a
 * host-addressable device (cpu_eager, cpu_jit, tpu_sim) the memory is shared, on another
 * (gpu_opencl) it is copied. dtypes: f32 f64 f16 (kDLFloat), bf16 (kDLBfloat), i32 i64
 * (kDLInt), bool as kDLUInt 8 bits (DLPack 0.6 has no bool code; kDLBool = 6 of later
 * versions is also accepted on import), one lane. Metrics count each path:
 * dlpack.exports_zero_copy, dlpack.exports_copied, dlpack.imports_zero_copy,
 * dlpack.imports_copied. See docs/dlpack.md. */
struct DLManagedTensor;

/* Exports a tensor (materialising it first) as a new DLManagedTensor: device kDLCPU 0,
 * compact row-major with explicit strides, byte_offset 0. Zero-copy where the device is
 * host-addressable (data is the tensor's own buffer), else a host copy. The caller owns *out
 * and calls (*out)->deleter(*out) exactly once; until then the memory stays valid, also after
 * the tensor and the runtime handle are freed (the export holds a reference to the value and
 * to the runtime). The memory is shared with an immutable LazyTensor value: treat it as
 * read-only (a write would be seen by every later use of the tensor). */
LT_API lt_error* lt_tensor_to_dlpack(lt_tensor* tensor, struct DLManagedTensor** out);

/* Imports a DLPack tensor of host memory (kDLCPU, kDLCUDAHost, kDLROCMHost) onto `device`
 * as a new materialised tensor. On success LazyTensor owns `managed`:
 * - in place (zero-copy) when the device is host-addressable, its plugin can wrap host
 *   memory (ABI 1.1 buffer_wrap_host; every in-tree kit backend can) and the data is compact
 *   row-major and 64-byte aligned: managed->deleter runs exactly once, when the value is no
 *   longer used (its last tensor handle, pending graph and DLPack export gone). The producer
 *   must not write the memory meanwhile;
 * - otherwise copied (strided and negative-stride layouts are gathered into row-major
 *   order), and managed->deleter runs before this call returns.
 * On error nothing is taken: *out is not written and the deleter is not called. Errors name
 * what was wrong: NULL arguments or data (INVALID_ARGUMENT), a device type that is not host
 * memory, a dtype {code, bits, lanes} LazyTensor lacks (UNSUPPORTED), a bad ndim or shape,
 * bool bytes other than 0 and 1 (INVALID_ARGUMENT). */
LT_API lt_error* lt_tensor_from_dlpack(lt_device* device, struct DLManagedTensor* managed,
                                       lt_tensor** out);

/* ---- data-parallel training across processes (appended in 0.1; docs/distributed.md) ---- */

/* One process group per process, over MPI: started under `mpirun -np N`, each process is one
 * rank of N (a program started without mpirun is a group of one). liblazytensor does not
 * link MPI: lt_dist_init opens the MPI transport (liblazytensor_mpi.so, beside liblazytensor)
 * and fails with LT_STATUS_UNSUPPORTED, saying so, in a build without MPI. */

/* Initialises MPI (unless the application did) and the group; rank and world_size out (either
 * may be NULL). Calling it again returns the same values. */
LT_API lt_error* lt_dist_init(int64_t* rank, int64_t* world_size);
/* Finalises MPI (if lt_dist_init initialised it). The group cannot be started again. */
LT_API lt_error* lt_dist_finalize(void);
LT_API int lt_dist_is_initialized(void);
/* This process's rank, and the group's size; 0 and 1 before lt_dist_init. */
LT_API int64_t lt_dist_rank(void);
LT_API int64_t lt_dist_world_size(void);
/* Prints `message` (may be NULL) naming this rank to stderr and ends every process of the
 * group (MPI_Abort) with exit status `code` (1 if 0). Never returns. For an error that only
 * this rank has seen: the others would otherwise wait in their next collective. */
LT_API void lt_dist_abort(int code, const char* message);

/* Collectives: ops of the lazy graph (category "collective" of the op table), run by the
 * core on host memory between the regions that produce and consume them, unless the backend
 * claims them. Every rank must trace the same collectives in the same order with the same
 * dtypes and shapes: before a graph's first collective the ranks compare them and a mismatch
 * is LT_STATUS_DISTRIBUTED naming each rank's collectives. An MPI failure (a peer that died)
 * is LT_STATUS_DISTRIBUTED too. */
typedef enum lt_reduce_op {
  LT_REDUCE_SUM = 0,
  LT_REDUCE_MEAN = 1, /* the sum divided by the world size */
  LT_REDUCE_MAX = 2
} lt_reduce_op;
/* Element-wise reduction over every rank's `a` (numeric dtypes); the result on every rank. */
LT_API lt_error* lt_all_reduce(lt_tensor* a, lt_reduce_op op, lt_tensor** out);
/* Rank `root`'s `a` on every rank (every rank passes a tensor of the same dtype and shape). */
LT_API lt_error* lt_broadcast(lt_tensor* a, int64_t root, lt_tensor** out);
/* Every rank's `a` (rank >= 1), concatenated along dim 0 in rank order: [world * d0, ...]. */
LT_API lt_error* lt_all_gather(lt_tensor* a, lt_tensor** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LAZYTENSOR_LT_H */
