// transport.cpp — liblazytensor_mpi.so: the MPI side of lt_dist_* (core/src/dist.cpp opens it
// with dlopen), so only programs that train across processes load libmpi. Collectives run on
// MPI_COMM_WORLD with MPI_ERRORS_RETURN: an MPI error comes back as a message, not an abort.
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "dist_transport.h"

namespace {

int report(int rc, const char* what, char* err, size_t n) {
  if (rc == MPI_SUCCESS) return 0;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::snprintf(err, n, "%s: %s", what, text);
  return 1;
}

bool mpi_type(lt_dtype d, MPI_Datatype* t) {
  switch (d) {
    case LT_DTYPE_F32:
      *t = MPI_FLOAT;
      return true;
    case LT_DTYPE_F64:
      *t = MPI_DOUBLE;
      return true;
    case LT_DTYPE_I32:
      *t = MPI_INT32_T;
      return true;
    case LT_DTYPE_I64:
      *t = MPI_INT64_T;
      return true;
    default:
      return false;
  }
}

int t_init(int* rank, int* size, char* err, size_t n) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      std::snprintf(err, n, "MPI_Init_thread failed (code %d)", rc);
      return 1;
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (report(MPI_Comm_rank(MPI_COMM_WORLD, rank), "MPI_Comm_rank", err, n)) return 1;
  return report(MPI_Comm_size(MPI_COMM_WORLD, size), "MPI_Comm_size", err, n);
}

int t_finalize(char* err, size_t n) {
  int done = 0;
  MPI_Finalized(&done);
  return done ? 0 : report(MPI_Finalize(), "MPI_Finalize", err, n);
}

double g_timeout = 0;  // seconds; 0: blocking collectives (set_timeout, before any collective)

void t_set_timeout(double seconds) {
  g_timeout = seconds > 0 ? seconds : 0;
}

// One collective: MPI's blocking call, or with a deadline its non-blocking form polled (a
// rank that never arrives, stuck or traced differently, becomes an error instead of a hang).
template <class Blocking, class Start>
int collective(const char* name, Blocking&& blocking, Start&& start, char* err, size_t n) {
  if (g_timeout <= 0) return report(blocking(), name, err, n);
  MPI_Request req = MPI_REQUEST_NULL;
  if (report(start(&req), name, err, n)) return 1;
  const double t0 = MPI_Wtime();
  for (int done = 0; !done;) {
    if (report(MPI_Test(&req, &done, MPI_STATUS_IGNORE), name, err, n)) return 1;
    if (!done && MPI_Wtime() - t0 > g_timeout) {
      std::snprintf(err, n,
                    "%s: not complete after %g s (LT_DIST_TIMEOUT): another rank has not "
                    "reached this collective (stuck, or it traced a different graph)",
                    name, g_timeout);
      return 1;
    }
  }
  return 0;
}

template <class T>
void scale(void* buf, size_t count, double f) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] * f);
}

int t_all_reduce(void* buf, size_t count, lt_dtype dtype, int reduce, char* err, size_t n) {
  MPI_Datatype t;
  if (!mpi_type(dtype, &t)) {
    std::snprintf(err, n, "dtype %s cannot be reduced (f32, f64, i32, i64)", lt_dtype_name(dtype));
    return 1;
  }
  if (count > static_cast<size_t>(INT32_MAX)) {
    std::snprintf(err, n, "%zu elements exceed MPI's count limit", count);
    return 1;
  }
  const MPI_Op op = reduce == 2 ? MPI_MAX : MPI_SUM;
  const int c = static_cast<int>(count);
  if (collective(
          "MPI_Allreduce",
          [&] { return MPI_Allreduce(MPI_IN_PLACE, buf, c, t, op, MPI_COMM_WORLD); },
          [&](MPI_Request* r) {
            return MPI_Iallreduce(MPI_IN_PLACE, buf, c, t, op, MPI_COMM_WORLD, r);
          },
          err, n))
    return 1;
  if (reduce == 1) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const double f = 1.0 / size;
    if (dtype == LT_DTYPE_F32) scale<float>(buf, count, f);
    if (dtype == LT_DTYPE_F64) scale<double>(buf, count, f);
    if (dtype == LT_DTYPE_I32) scale<int32_t>(buf, count, f);
    if (dtype == LT_DTYPE_I64) scale<int64_t>(buf, count, f);
  }
  return 0;
}

int t_broadcast(void* buf, size_t nbytes, int root, char* err, size_t n) {
  if (nbytes > static_cast<size_t>(INT32_MAX)) {
    std::snprintf(err, n, "%zu bytes exceed MPI's count limit", nbytes);
    return 1;
  }
  const int c = static_cast<int>(nbytes);
  return collective(
      "MPI_Bcast", [&] { return MPI_Bcast(buf, c, MPI_BYTE, root, MPI_COMM_WORLD); },
      [&](MPI_Request* r) { return MPI_Ibcast(buf, c, MPI_BYTE, root, MPI_COMM_WORLD, r); }, err,
      n);
}

int t_all_gather(const void* in, size_t nbytes, void* out, char* err, size_t n) {
  if (nbytes > static_cast<size_t>(INT32_MAX)) {
    std::snprintf(err, n, "%zu bytes exceed MPI's count limit", nbytes);
    return 1;
  }
  const int c = static_cast<int>(nbytes);
  return collective(
      "MPI_Allgather",
      [&] { return MPI_Allgather(in, c, MPI_BYTE, out, c, MPI_BYTE, MPI_COMM_WORLD); },
      [&](MPI_Request* r) {
        return MPI_Iallgather(in, c, MPI_BYTE, out, c, MPI_BYTE, MPI_COMM_WORLD, r);
      },
      err, n);
}

void t_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

const char* t_version() {
  static char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (!v[0]) MPI_Get_library_version(v, &len);
  return v;
}

const lt_dist_transport kTransport = {LT_DIST_TRANSPORT_STRUCT_SIZE,
                                      t_init,
                                      t_finalize,
                                      t_all_reduce,
                                      t_broadcast,
                                      t_all_gather,
                                      t_abort,
                                      t_version,
                                      t_set_timeout};

}  // namespace

extern "C" __attribute__((visibility("default"))) const lt_dist_transport* lt_dist_get_transport(
    void) {
  return &kTransport;
}
