/* partial.c — test-only backend "partial": runs add, mul, relu and matmul on f32 (with
 * broadcasting) on host memory and declines every other op, so the core must send those to
 * the cpu_eager fallback. Built only for tests, into build/test_plugins/partial/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazytensor/lt_plugin.h"

struct lt_plugin_error {
  lt_status_code code;
  char message[256];
};
struct lt_plugin_context {
  lt_plugin_log_fn log;
  void* log_user;
  int fail_compile; /* option fail_compile=1: every compile fails (tests the fallback path) */
  long compiles;
};
struct lt_plugin_buffer {
  size_t nbytes;
  unsigned char* data;
};

enum { OP_INPUT, OP_ADD, OP_MUL, OP_RELU, OP_MATMUL, OP_OTHER };

typedef struct pnode {
  int op;
  size_t rank;
  int64_t shape[8];
  size_t numel;
  int32_t operands[2];
  size_t num_operands;
} pnode;

struct lt_plugin_executable {
  size_t num_nodes;
  pnode* nodes;
  size_t num_inputs;
  int32_t* inputs;
  size_t num_outputs;
  int32_t* outputs;
};

static lt_plugin_error* make_err(lt_status_code code, const char* msg) {
  lt_plugin_error* e = (lt_plugin_error*)calloc(1, sizeof *e);
  if (!e) return NULL; /* cannot report; callers treat NULL as success, acceptable for a test */
  e->code = code;
  snprintf(e->message, sizeof e->message, "%s", msg);
  return e;
}
static const char* err_message(const lt_plugin_error* e) {
  return e->message;
}
static lt_status_code err_code(const lt_plugin_error* e) {
  return e->code;
}
static void err_destroy(lt_plugin_error* e) {
  free(e);
}

/* LT_TEST_PARTIAL_WRONG_ADD=1: add is off by one, so that a conformance run fails on purpose
 * (tests/sdk/conformance_table_test.sh checks how lt-conformance reports it). */
static float g_wrong_add;
static lt_plugin_error* create(lt_plugin_create_args* a) {
  const char* wrong = getenv("LT_TEST_PARTIAL_WRONG_ADD");
  g_wrong_add = wrong && strcmp(wrong, "1") == 0 ? 1.0f : 0.0f;
  lt_plugin_context* c = (lt_plugin_context*)calloc(1, sizeof *c);
  if (!c) return make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  c->log = a->log;
  c->log_user = a->log_user;
  for (size_t i = 0; i < a->num_options; ++i)
    if (strcmp(a->options[i].key, "fail_compile") == 0) c->fail_compile = atoi(a->options[i].value);
  a->context = c;
  return NULL;
}
static void destroy(lt_plugin_context* c) {
  free(c);
}
static lt_plugin_error* device_count(lt_plugin_context* c, size_t* out) {
  (void)c;
  *out = 1;
  return NULL;
}
static lt_plugin_error* device_info(lt_plugin_device_info_args* a) {
  a->name = "host";
  a->kind = "cpu";
  a->description = "test backend: add, mul, relu, matmul (f32) only";
  a->memory_bytes = 0;
  a->host_addressable = 1;
  return NULL;
}
static lt_plugin_error* buffer_alloc(lt_plugin_buffer_args* a) {
  lt_plugin_buffer* b = (lt_plugin_buffer*)calloc(1, sizeof *b);
  if (!b) return make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  b->nbytes = a->nbytes;
  b->data = (unsigned char*)malloc(a->nbytes ? a->nbytes : 1);
  if (!b->data) {
    free(b);
    return make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  a->buffer = b;
  return NULL;
}
static void buffer_free(lt_plugin_context* c, lt_plugin_buffer* b) {
  (void)c;
  if (b) free(b->data);
  free(b);
}
static lt_plugin_error* buffer_upload(lt_plugin_buffer_args* a) {
  if (a->offset + a->nbytes > a->buffer->nbytes)
    return make_err(LT_STATUS_INVALID_ARGUMENT, "upload out of range");
  memcpy(a->buffer->data + a->offset, a->src, a->nbytes);
  return NULL;
}
static lt_plugin_error* buffer_download(lt_plugin_buffer_args* a) {
  if (a->offset + a->nbytes > a->buffer->nbytes)
    return make_err(LT_STATUS_INVALID_ARGUMENT, "download out of range");
  memcpy(a->dst, a->buffer->data + a->offset, a->nbytes);
  return NULL;
}
static lt_plugin_error* buffer_host_ptr(lt_plugin_buffer_args* a) {
  a->host_ptr = a->buffer->data;
  return NULL;
}

static int op_code(const char* op) {
  if (strcmp(op, "input") == 0) return OP_INPUT;
  if (strcmp(op, "add") == 0) return OP_ADD;
  if (strcmp(op, "mul") == 0) return OP_MUL;
  if (strcmp(op, "relu") == 0) return OP_RELU;
  if (strcmp(op, "matmul") == 0) return OP_MATMUL;
  return OP_OTHER;
}

static lt_plugin_error* supports(lt_plugin_supports_args* a) {
  const lt_graph_node* n = &a->graph->nodes[a->node];
  int code = op_code(n->op);
  a->supported = code != OP_OTHER && code != OP_INPUT && n->dtype == LT_DTYPE_F32 && n->rank <= 8;
  for (size_t k = 0; a->supported && k < n->num_operands; ++k)
    a->supported = a->graph->nodes[n->operands[k]].dtype == LT_DTYPE_F32;
  return NULL;
}

static void exe_free(lt_plugin_executable* e) {
  if (!e) return;
  free(e->nodes);
  free(e->inputs);
  free(e->outputs);
  free(e);
}

static lt_plugin_error* compile(lt_plugin_compile_args* a) {
  const lt_graph* g = a->graph;
  if (a->context->fail_compile)
    return make_err(LT_STATUS_UNSUPPORTED, "compile disabled by option fail_compile");
  lt_plugin_executable* e = (lt_plugin_executable*)calloc(1, sizeof *e);
  if (!e) return make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  e->num_nodes = g->num_nodes;
  e->nodes = (pnode*)calloc(g->num_nodes ? g->num_nodes : 1, sizeof(pnode));
  e->num_inputs = g->num_inputs;
  e->inputs = (int32_t*)calloc(g->num_inputs + 1, sizeof(int32_t));
  e->num_outputs = g->num_outputs;
  e->outputs = (int32_t*)calloc(g->num_outputs + 1, sizeof(int32_t));
  if (!e->nodes || !e->inputs || !e->outputs) {
    exe_free(e);
    return make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < g->num_nodes; ++i) {
    const lt_graph_node* n = &g->nodes[i];
    pnode* p = &e->nodes[i];
    p->op = op_code(n->op);
    if (p->op == OP_OTHER || n->rank > 8 || n->num_operands > 2) {
      exe_free(e);
      return make_err(LT_STATUS_UNSUPPORTED, "partial: unsupported node in region");
    }
    p->rank = n->rank;
    p->numel = 1;
    for (size_t d = 0; d < n->rank; ++d) p->shape[d] = n->shape[d], p->numel *= (size_t)n->shape[d];
    p->num_operands = n->num_operands;
    for (size_t k = 0; k < n->num_operands; ++k) p->operands[k] = n->operands[k];
  }
  memcpy(e->inputs, g->inputs, g->num_inputs * sizeof(int32_t));
  memcpy(e->outputs, g->outputs, g->num_outputs * sizeof(int32_t));
  a->context->compiles++;
  a->executable = e;
  return NULL;
}

/* Offset in operand `o` (shape right-aligned to out) of output element `idx`. */
static size_t bcast_offset(const pnode* out, const pnode* o, size_t idx) {
  size_t off = 0, stride = 1;
  for (size_t d = 0; d < out->rank; ++d) {
    size_t od = out->rank - 1 - d;
    size_t coord = idx % (size_t)out->shape[od];
    idx /= (size_t)out->shape[od];
    if (d < o->rank) {
      size_t dim = (size_t)o->shape[o->rank - 1 - d];
      if (dim != 1) off += coord * stride;
      stride *= dim;
    }
  }
  return off;
}

static lt_plugin_error* execute(lt_plugin_execute_args* a) {
  lt_plugin_executable* e = a->executable;
  float** vals = (float**)calloc(e->num_nodes + 1, sizeof(float*));
  unsigned char* owned = (unsigned char*)calloc(e->num_nodes + 1, 1);
  lt_plugin_error* err = NULL;
  if (!vals || !owned) {
    free(vals);
    free(owned);
    return make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t k = 0; k < e->num_inputs; ++k) vals[e->inputs[k]] = (float*)a->inputs[k]->data;
  for (size_t i = 0; i < e->num_nodes && !err; ++i) {
    const pnode* n = &e->nodes[i];
    if (n->op == OP_INPUT) continue;
    float* out = (float*)malloc((n->numel ? n->numel : 1) * sizeof(float));
    if (!out) {
      err = make_err(LT_STATUS_OUT_OF_MEMORY, "out of memory");
      break;
    }
    vals[i] = out;
    owned[i] = 1;
    const pnode* x = &e->nodes[n->operands[0]];
    const float* xa = vals[n->operands[0]];
    if (n->op == OP_RELU) {
      for (size_t j = 0; j < n->numel; ++j)
        out[j] = xa[j] > 0 ? xa[j] : (xa[j] != xa[j] ? xa[j] : 0.0f);
    } else if (n->op == OP_ADD || n->op == OP_MUL) {
      const pnode* y = &e->nodes[n->operands[1]];
      const float* ya = vals[n->operands[1]];
      for (size_t j = 0; j < n->numel; ++j) {
        float u = xa[bcast_offset(n, x, j)], v = ya[bcast_offset(n, y, j)];
        out[j] = n->op == OP_ADD ? u + v + g_wrong_add : u * v;
      }
    } else if (n->op == OP_MATMUL) {
      const float* ya = vals[n->operands[1]];
      size_t batch = n->rank == 3 ? (size_t)n->shape[0] : 1;
      size_t M = (size_t)n->shape[n->rank - 2], N = (size_t)n->shape[n->rank - 1];
      size_t K = (size_t)x->shape[x->rank - 1];
      for (size_t b = 0; b < batch; ++b)
        for (size_t m = 0; m < M; ++m)
          for (size_t j = 0; j < N; ++j) {
            float s = 0;
            for (size_t k = 0; k < K; ++k)
              s += xa[b * M * K + m * K + k] * ya[b * K * N + k * N + j];
            out[b * M * N + m * N + j] = s;
          }
    }
  }
  for (size_t k = 0; k < e->num_outputs && !err; ++k) {
    const pnode* n = &e->nodes[e->outputs[k]];
    memcpy(a->outputs[k]->data, vals[e->outputs[k]], n->numel * sizeof(float));
  }
  for (size_t i = 0; i < e->num_nodes; ++i)
    if (owned[i]) free(vals[i]);
  free(vals);
  free(owned);
  return err;
}

static void executable_destroy(lt_plugin_context* c, lt_plugin_executable* e) {
  (void)c;
  exe_free(e);
}

static void emit_stats(lt_plugin_stats_args* a) {
  if (a->executable) {
    a->emit(a->user, "kernels",
            (double)a->executable->num_nodes - (double)a->executable->num_inputs);
  } else {
    a->emit(a->user, "compiles", (double)a->context->compiles);
  }
}
static lt_plugin_error* stats(lt_plugin_stats_args* a) {
  emit_stats(a);
  return NULL;
}

static const lt_plugin_api kApi = {LT_PLUGIN_API_STRUCT_SIZE,
                                   LT_PLUGIN_ABI_MAJOR,
                                   LT_PLUGIN_ABI_MINOR,
                                   "partial",
                                   "0.1-test",
                                   err_message,
                                   err_code,
                                   err_destroy,
                                   create,
                                   destroy,
                                   device_count,
                                   device_info,
                                   buffer_alloc,
                                   buffer_free,
                                   buffer_upload,
                                   buffer_download,
                                   buffer_host_ptr,
                                   supports,
                                   compile,
                                   execute,
                                   executable_destroy,
                                   stats};

LT_PLUGIN_EXPORT const lt_plugin_api* lt_plugin_get_api(void) {
  return &kApi;
}
