/* lt_onnx.h — the C API of LazyTensor::onnx: load an ONNX model (.onnx, external data files
 * too), list its inputs and outputs, run it with named inputs as lazy tensors on any device.
 *
 * Conventions are lt.h's: fallible calls return lt_error* (NULL on success; the caller frees
 * it with lt_error_destroy); no C++ exception crosses this API. Errors name the file and, for
 * a node, its name, op type and opset. A model that needs what LazyTensor leaves out
 * (sequence, optional, map or string types, training-domain ops) is refused at load with
 * LT_STATUS_UNSUPPORTED and a message that starts with "out of scope: ". */
#ifndef LAZYTENSOR_LT_ONNX_H
#define LAZYTENSOR_LT_ONNX_H

#include "lazytensor/lt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_onnx_model lt_onnx_model;

/* The newest ai.onnx opset the importer implements; a node of a newer opset is refused. */
#define LT_ONNX_MAX_OPSET 17

/* Reads and checks `path` (opsets, types, graph well-formedness) and uploads its initializers
 * to `device` once. The model keeps a reference to the device's runtime. */
LT_API lt_error* lt_onnx_load(lt_device* device, const char* path, lt_onnx_model** out);
LT_API void lt_onnx_free(lt_onnx_model* model);

/* Graph inputs the caller feeds (initializers excluded) and graph outputs. */
LT_API size_t lt_onnx_input_count(const lt_onnx_model* model);
LT_API size_t lt_onnx_output_count(const lt_onnx_model* model);
LT_API const char* lt_onnx_input_name(const lt_onnx_model* model, size_t index);
LT_API const char* lt_onnx_output_name(const lt_onnx_model* model, size_t index);
/* Declared dtype (the LazyTensor dtype that carries the ONNX type: uint8/int8/int16/uint16/
 * uint32 travel as i32, uint64 as i64), rank and dims (-1: symbolic or unknown; NULL shape
 * when the rank is unknown). `onnx_type` receives the ONNX type name ("uint8"); any pointer
 * may be NULL. The strings and dims live as long as the model. */
LT_API lt_error* lt_onnx_input_info(const lt_onnx_model* model, size_t index, lt_dtype* dtype,
                                    size_t* rank, const int64_t** dims, const char** onnx_type);
LT_API lt_error* lt_onnx_output_info(const lt_onnx_model* model, size_t index, lt_dtype* dtype,
                                     size_t* rank, const int64_t** dims, const char** onnx_type);

/* Traces the graph with `num_inputs` named inputs (every input without an initializer must be
 * given) and writes lt_onnx_output_count() new lazy tensors to `outputs` (the caller frees
 * each with lt_tensor_free). Nothing runs until a value is needed. Inputs whose dims are
 * symbolic (dim_param) are marked dynamic (lt_tensor_mark_dynamic on the caller's tensor), so
 * one compile serves every size. */
LT_API lt_error* lt_onnx_run(lt_onnx_model* model, const char* const* names,
                             lt_tensor* const* inputs, size_t num_inputs, lt_tensor** outputs);

/* Human-readable summary: inputs, outputs, opsets, op types with whether each is supported.
 * The caller frees it with lt_string_free. */
LT_API lt_error* lt_onnx_describe(const lt_onnx_model* model, char** out);
/* The same for a file that may not load (ops listed as supported or not); no device needed. */
LT_API lt_error* lt_onnx_describe_file(const char* path, char** out);

/* Reads a TensorProto file (.pb, the backend tests' input_0.pb) or a NumPy .npy file onto
 * `device`; `onnx_type` (may be NULL) receives the file's ONNX element type id. */
LT_API lt_error* lt_onnx_read_tensor(lt_device* device, const char* path, lt_tensor** out,
                                     int* onnx_type);

#ifdef __cplusplus
}
#endif

#endif /* LAZYTENSOR_LT_ONNX_H */
