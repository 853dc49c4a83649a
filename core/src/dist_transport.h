/* dist_transport.h — the internal C table between liblazytensor and its MPI transport,
 * liblazytensor_mpi.so (core/mpi/), which the core opens with dlopen at lt_dist_init: the core
 * itself never links MPI, so a program that does not train across processes needs no MPI
 * library at run time, and a build without MPI only lacks that one file.
 *
 * Not a public header: both sides are built from this tree together (struct_size still
 * guards a stale library left in the build directory). Every function returns 0 on success,
 * else non-zero with a NUL-terminated message in err[0..err_size). Buffers are host memory. */
#ifndef LAZYTENSOR_DIST_TRANSPORT_H
#define LAZYTENSOR_DIST_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "lazytensor/lt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_dist_transport {
  size_t struct_size;
  /* MPI_Init (thread level FUNNELED) unless already initialised, MPI_ERRORS_RETURN on the
   * world communicator; rank and size out. */
  int (*init)(int* rank, int* size, char* err, size_t err_size);
  int (*finalize)(char* err, size_t err_size);
  /* In place over `count` elements of dtype; reduce: 0 sum, 1 mean (sum / size), 2 max. */
  int (*all_reduce)(void* buf, size_t count, lt_dtype dtype, int reduce, char* err,
                    size_t err_size);
  int (*broadcast)(void* buf, size_t nbytes, int root, char* err, size_t err_size);
  /* out holds size * nbytes: every rank's nbytes in rank order. */
  int (*all_gather)(const void* in, size_t nbytes, void* out, char* err, size_t err_size);
  void (*abort)(int code); /* MPI_Abort on the world communicator; does not return */
  const char* (*library_version)(void);
  /* Seconds a collective may wait for the other ranks before it fails (0: forever, MPI's
   * blocking calls). With a limit the collectives are MPI's non-blocking ones, polled. */
  void (*set_timeout)(double seconds);
} lt_dist_transport;

#define LT_DIST_TRANSPORT_STRUCT_SIZE (offsetof(lt_dist_transport, set_timeout) + sizeof(void*))

/* The one symbol liblazytensor_mpi.so exports. */
typedef const lt_dist_transport* (*lt_dist_get_transport_fn)(void);
#define LT_DIST_TRANSPORT_SYMBOL "lt_dist_get_transport"

#ifdef __cplusplus
}
#endif

#endif /* LAZYTENSOR_DIST_TRANSPORT_H */
