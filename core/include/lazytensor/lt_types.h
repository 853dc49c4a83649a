/* lt_types.h — value types shared by the application API (lt.h) and the plugin ABI
 * (lt_plugin.h): dtypes, status codes and op attributes. C11, no dependencies. */
#ifndef LAZYTENSOR_LT_TYPES_H
#define LAZYTENSOR_LT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. Values are fixed forever; new ones are appended, never reused.
 * Element sizes in bytes: F32 4, F64 8, I32 4, I64 8, BOOL 1 (0 or 1), BF16 2, F16 2. */
typedef enum lt_dtype {
  LT_DTYPE_INVALID = 0,
  LT_DTYPE_F32 = 1,
  LT_DTYPE_F64 = 2,
  LT_DTYPE_I32 = 3,
  LT_DTYPE_I64 = 4,
  LT_DTYPE_BOOL = 5,
  LT_DTYPE_BF16 = 6, /* storage only; backends may compute in f32 */
  LT_DTYPE_F16 = 7,  /* storage only; backends may compute in f32 */
  /* Not dtypes. Together they make every int32 value representable in lt_dtype (the MIN
   * one the negative values too), so a value that arrives from a caller or plugin can be
   * checked (and refused) without undefined behaviour in C++; the same convention as
   * Vulkan's *_MAX_ENUM. */
  LT_DTYPE_MAX_ENUM_ = 0x7FFFFFFF,
  LT_DTYPE_MIN_ENUM_ = -0x7FFFFFFF - 1
} lt_dtype;

/* Error categories carried by every error object. Values are fixed forever. */
typedef enum lt_status_code {
  LT_STATUS_OK = 0,
  LT_STATUS_INVALID_ARGUMENT = 1, /* bad pointer, count, attribute value, option */
  LT_STATUS_SHAPE_MISMATCH = 2,   /* shapes that do not fit the op */
  LT_STATUS_DTYPE_MISMATCH = 3,   /* a dtype the op does not accept */
  LT_STATUS_UNKNOWN_OP = 4,       /* op name not in the registry */
  LT_STATUS_UNSUPPORTED = 5,      /* valid request this component cannot do */
  LT_STATUS_NOT_FOUND = 6,        /* device, plugin, file, config key */
  LT_STATUS_PLUGIN_ERROR = 7,     /* a plugin failed to load or reported an error */
  LT_STATUS_FALLBACK_REFUSED = 8, /* fallback policy "error" refused an op */
  LT_STATUS_OUT_OF_MEMORY = 9,
  LT_STATUS_IO_ERROR = 10, /* file could not be read or parsed */
  LT_STATUS_INTERNAL = 11, /* a bug: please report */
  LT_STATUS_ABI_MISMATCH = 12,
  LT_STATUS_DISTRIBUTED = 13, /* a collective failed: MPI error, or ranks traced different graphs */
  /* Not codes: every int32 value is representable (see LT_DTYPE_MAX_ENUM_), so a code outside
     0..13 from a plugin's error_code is defined to read; the core reports it as
     LT_STATUS_PLUGIN_ERROR. */
  LT_STATUS_MAX_ENUM_ = 0x7FFFFFFF,
  LT_STATUS_MIN_ENUM_ = -0x7FFFFFFF - 1
} lt_status_code;

/* Kinds of op attribute. Values are fixed forever. */
typedef enum lt_attr_kind {
  LT_ATTR_INT = 1,    /* field i */
  LT_ATTR_FLOAT = 2,  /* field f */
  LT_ATTR_INTS = 3,   /* fields ints, ints_len */
  LT_ATTR_STRING = 4, /* field s (NUL-terminated) */
  /* Not kinds: every int32 value is representable (see LT_DTYPE_MAX_ENUM_). */
  LT_ATTR_KIND_MAX_ENUM_ = 0x7FFFFFFF,
  LT_ATTR_KIND_MIN_ENUM_ = -0x7FFFFFFF - 1
} lt_attr_kind;

/* One named op attribute (see docs/ops.md for each op's attributes).
 * Element struct: its layout is frozen for the ABI major version (arrays of it are
 * indexed by sizeof). Pointers are borrowed: valid for the duration of the call that
 * receives them, or, inside an lt_graph, as long as that graph. */
typedef struct lt_attr {
  const char* name;
  lt_attr_kind kind;
  int64_t i;
  double f;
  const int64_t* ints;
  size_t ints_len;
  const char* s;
} lt_attr;

/* Size in bytes of one element of dtype, 0 for LT_DTYPE_INVALID or unknown values. */
static inline size_t lt_dtype_size(lt_dtype dtype) {
  switch (dtype) {
    case LT_DTYPE_F32:
      return 4;
    case LT_DTYPE_F64:
      return 8;
    case LT_DTYPE_I32:
      return 4;
    case LT_DTYPE_I64:
      return 8;
    case LT_DTYPE_BOOL:
      return 1;
    case LT_DTYPE_BF16:
      return 2;
    case LT_DTYPE_F16:
      return 2;
    default:
      return 0;
  }
}

/* Short lower-case name ("f32", "i64", "bool", ...), "invalid" for unknown values. */
static inline const char* lt_dtype_name(lt_dtype dtype) {
  switch (dtype) {
    case LT_DTYPE_F32:
      return "f32";
    case LT_DTYPE_F64:
      return "f64";
    case LT_DTYPE_I32:
      return "i32";
    case LT_DTYPE_I64:
      return "i64";
    case LT_DTYPE_BOOL:
      return "bool";
    case LT_DTYPE_BF16:
      return "bf16";
    case LT_DTYPE_F16:
      return "f16";
    default:
      return "invalid";
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LAZYTENSOR_LT_TYPES_H */
