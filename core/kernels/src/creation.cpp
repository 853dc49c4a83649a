// creation.cpp — the creation ops (full, arange) and the counter-based random ops
// (lt_random.h: identical streams on every backend).
#include <cmath>
#include <cstring>

#include "convert.h"
#include "kernels.h"
#include "lazytensor/lt_random.h"

namespace lt::host {
namespace {

// ---- creation ----

// params: [0] = value as double bits
template <class D>
void full_kernel(const KernelCall& c) {
  const D v = convert<D>(read_double(c.params));
  D* o = reinterpret_cast<D*>(c.out.data);
  parallel_for(c.out.numel, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = v;
  });
}

// params: [0] start, [1] step (double bits)
template <class D>
void arange_kernel(const KernelCall& c) {
  const double start = read_double(c.params), step = read_double(c.params + 1);
  D* o = reinterpret_cast<D*>(c.out.data);
  parallel_for(c.out.numel, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = convert<D>(start + static_cast<double>(i) * step);
  });
}

template <class D>
void full_k(const KernelCall& c) {
  full_kernel<D>(c);
}
template <class D>
void arange_k(const KernelCall& c) {
  arange_kernel<D>(c);
}

void prepare_full(PrepareCall& c) {
  if (!is_numeric(c.out.dtype) && c.out.dtype != LT_DTYPE_BOOL) return;
  push_double(*c.params, c.attrs.f("value"));
  c.fn = LT_HOST_PICK_ALL(c.out.dtype, full_k);
}

void prepare_arange(PrepareCall& c) {
  if (!is_numeric(c.out.dtype)) return;
  push_double(*c.params, c.attrs.f("start"));
  push_double(*c.params, c.attrs.f("step"));
  c.fn = LT_HOST_PICK_ALL(c.out.dtype, arange_k);
}

// ---- random (lt_random.h; identical streams on every backend) ----

uint64_t seed_of(const KernelCall& c) {
  int64_t s;
  std::memcpy(&s, c.in[0].data, sizeof s);
  return static_cast<uint64_t>(s);
}

template <class T>
void uniform_kernel(const KernelCall& c) {
  const uint64_t seed = seed_of(c);
  const T low = static_cast<T>(read_double(c.params));
  const T high = static_cast<T>(read_double(c.params + 1));
  T* o = reinterpret_cast<T*>(c.out.data);
  parallel_for(c.out.numel, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T u = static_cast<T>(lt_random_unit_f32(seed, static_cast<uint64_t>(i)));
      o[i] = low + (high - low) * u;
    }
  });
}

template <class T>
void normal_kernel(const KernelCall& c) {
  const uint64_t seed = seed_of(c);
  const T mean = static_cast<T>(read_double(c.params));
  const T stdv = static_cast<T>(read_double(c.params + 1));
  const T two_pi = static_cast<T>(6.283185307179586476925286766559);
  T* o = reinterpret_cast<T*>(c.out.data);
  parallel_for(c.out.numel, 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint64_t k = static_cast<uint64_t>(i);
      T u1 = T(1) - static_cast<T>(lt_random_unit_f32(seed, 2 * k));
      T u2 = static_cast<T>(lt_random_unit_f32(seed, 2 * k + 1));
      T z = std::sqrt(T(-2) * std::log(u1)) * std::cos(two_pi * u2);
      o[i] = mean + stdv * z;
    }
  });
}

// params: [0] stride, [1] offset: element i is unit(seed, stride * i + offset).
template <class T>
void unit_kernel(const KernelCall& c) {
  const uint64_t seed = seed_of(c);
  const uint64_t stride = static_cast<uint64_t>(c.params[0]);
  const uint64_t offset = static_cast<uint64_t>(c.params[1]);
  T* o = reinterpret_cast<T*>(c.out.data);
  parallel_for(c.out.numel, 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      o[i] = static_cast<T>(lt_random_unit_f32(seed, stride * static_cast<uint64_t>(i) + offset));
  });
}

void prepare_random(PrepareCall& c) {
  if (!is_float(c.out.dtype)) return;
  const bool f32 = c.out.dtype == LT_DTYPE_F32;
  if (c.op == kOpRandomUnit) {
    c.params->push_back(c.attrs.i("stride"));
    c.params->push_back(c.attrs.i("offset"));
    c.fn = f32 ? &unit_kernel<float> : &unit_kernel<double>;
  } else if (c.op == kOpRandomNormal) {
    push_double(*c.params, c.attrs.f("mean"));
    push_double(*c.params, c.attrs.f("std"));
    c.fn = f32 ? &normal_kernel<float> : &normal_kernel<double>;
  } else {
    push_double(*c.params, c.attrs.f("low"));
    push_double(*c.params, c.attrs.f("high"));
    c.fn = f32 ? &uniform_kernel<float> : &uniform_kernel<double>;
  }
}

}  // namespace

void add_creation_ops(PrepareFn* t) {
  t[kOpFull] = prepare_full;
  t[kOpArange] = prepare_arange;
  t[kOpRandomUnit] = prepare_random;
  t[kOpRandomUniform] = prepare_random;
  t[kOpRandomNormal] = prepare_random;
}

}  // namespace lt::host
