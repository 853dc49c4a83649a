// CollectiveTest.cpp — the collectives (all_reduce, broadcast, all_gather) and
// lazytensor/distributed.hpp over a real MPI group: run as `mpirun -np N collective_test`
// (every rank runs every test and checks its own values against plain-loop references over
// the N ranks), and as `collective_test --no-init` (one process, no group: the errors).
#include <lazytensor/autograd.hpp>
#include <lazytensor/distributed.hpp>
#include <lazytensor/lazytensor.hpp>
#include <lazytensor/nn.hpp>
#include <lazytensor/optim.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

lt::Runtime& rt() {
  return lt::test::runtime();
}
lt::Device dev() {
  return rt().default_device();
}
int64_t rank() {
  return lt::dist::rank();
}
int64_t world() {
  return lt::dist::world_size();
}

// The error `f` throws, or a failure naming what was expected.
template <class F>
lt::Error error_of(F&& f) {
  try {
    f();
  } catch (const lt::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no lt::Error thrown";
  return lt::Error(LT_STATUS_OK, "");
}

TEST(Collective, AllReduceSumMeanAndMaxOverEveryRank) {
  const float r = static_cast<float>(rank());
  lt::Tensor x = lt::Tensor::from<float>(dev(), {r + 1, 2 * (r + 1), -r, 0.5f * r * r});
  std::vector<float> sum(4, 0), mx(4, -1e30f);
  for (int64_t q = 0; q < world(); ++q) {
    const float f = static_cast<float>(q);
    const float v[4] = {f + 1, 2 * (f + 1), -f, 0.5f * f * f};
    for (int i = 0; i < 4; ++i) sum[i] += v[i], mx[i] = std::max(mx[i], v[i]);
  }
  std::vector<float> mean(sum);
  for (float& m : mean) m /= static_cast<float>(world());
  EXPECT_EQ(x.all_reduce(LT_REDUCE_SUM).to_vector<float>(), sum);
  std::vector<float> got = lt::all_reduce(x, LT_REDUCE_MEAN).to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[i], mean[i]) << i;
  EXPECT_EQ(x.all_reduce(LT_REDUCE_MAX).to_vector<float>(), mx);
}

TEST(Collective, AllReduceOfIntegersIsExact) {
  lt::Tensor x = lt::Tensor::from<int64_t>(dev(), {rank(), (int64_t(1) << 40) + rank()});
  int64_t s = 0;
  for (int64_t q = 0; q < world(); ++q) s += q;
  EXPECT_EQ(x.all_reduce().to_vector<int64_t>(),
            (std::vector<int64_t>{s, (int64_t(1) << 40) * world() + s}));
}

TEST(Collective, BroadcastGivesEveryRankTheRootsValue) {
  const int64_t root = world() - 1;
  lt::Tensor x = lt::full(dev(), {2, 3}, static_cast<double>(10 * rank() + 1));
  std::vector<float> want(6, static_cast<float>(10 * root + 1));
  EXPECT_EQ(lt::broadcast(x, root).to_vector<float>(), want);
  EXPECT_EQ(x.broadcast(0).to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(Collective, AllGatherStacksEveryRanksRowsInRankOrder) {
  std::vector<float> mine;
  for (int i = 0; i < 6; ++i) mine.push_back(static_cast<float>(100 * rank() + i));
  lt::Tensor y = lt::Tensor::from<float>(dev(), mine, {2, 3}).all_gather();
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2 * world(), 3}));
  std::vector<float> want;
  for (int64_t q = 0; q < world(); ++q)
    for (int i = 0; i < 6; ++i) want.push_back(static_cast<float>(100 * q + i));
  EXPECT_EQ(y.to_vector<float>(), want);
}

// Every rank's loss is the same replicated value L; the rules give the gradient of the sum of
// the ranks' losses (Horovod's and torch.distributed's convention): N * dL/dw.
TEST(Collective, GradientOfAllReduceSumIsTheAllReduceSumOfTheGradient) {
  lt::Tensor w = lt::Tensor::from<float>(dev(), {1, 2, 3});
  lt::set_requires_grad(w);
  const double scale = static_cast<double>(rank() + 1);
  lt::Tensor loss = (w * scale).all_reduce(LT_REDUCE_SUM).sum();
  lt::backward(loss);
  const float want = static_cast<float>(world() * (rank() + 1));
  EXPECT_EQ(lt::grad(w).to_vector<float>(), std::vector<float>(3, want));
}

TEST(Collective, GradientOfAllGatherIsThisRanksRowsOfTheSummedGradient) {
  lt::Tensor w = lt::Tensor::from<float>(dev(), {1, 1});
  lt::set_requires_grad(w);
  std::vector<float> c;
  for (int64_t j = 0; j < 2 * world(); ++j) c.push_back(static_cast<float>(j + 1));
  lt::Tensor loss = (w.all_gather() * lt::Tensor::from<float>(dev(), c)).sum();
  lt::backward(loss);
  const float n = static_cast<float>(world());
  EXPECT_EQ(lt::grad(w).to_vector<float>(),
            (std::vector<float>{n * c[size_t(2 * rank())], n * c[size_t(2 * rank() + 1)]}));
}

TEST(Collective, AllReduceMaxHasNoGradient) {
  lt::Tensor w = lt::Tensor::from<float>(dev(), {1, 2});
  lt::set_requires_grad(w);
  lt::Tensor loss = w.all_reduce(LT_REDUCE_MAX).sum();
  lt::Error e = error_of([&] { lt::backward(loss); });
  EXPECT_NE(std::string(e.what()).find("all_reduce(max) has no gradient"), std::string::npos)
      << e.what();
}

TEST(Collective, DifferentShapesOnTheRanksAreReportedOnEveryRankNamingEach) {
  lt::Tensor x = lt::ones(dev(), {4 + rank()});
  lt::Tensor y = x.all_reduce();
  lt::Error e = error_of([&] { (void)y.to_vector<float>(); });
  EXPECT_EQ(e.code(), LT_STATUS_DISTRIBUTED);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("collective mismatch between ranks"), std::string::npos) << msg;
  for (int64_t q = 0; q < world(); ++q) {
    std::string want =
        "rank " + std::to_string(q) + " runs [all_reduce(sum) f32 [" + std::to_string(4 + q) + "]]";
    EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in: " << msg;
  }
  // The group still works afterwards.
  EXPECT_EQ(lt::ones(dev(), {2}).all_reduce().to_vector<float>(),
            std::vector<float>(2, static_cast<float>(world())));
}

// Issue #29: ranks whose collectives agree but whose inputs do not (a different batch size per
// rank) reduced unrelated gradients and reported wrong numbers. The graph check covers every
// input: the shards of one global batch (non-increasing by rank, at most one row apart) pass,
// anything else fails on every rank naming each rank's shape.
TEST(Collective, InputsThatDifferBeyondOneBatchSplitAreReportedOnEveryRank) {
  const int64_t r = rank(), w = world();
  auto step = [&](int64_t rows) {
    lt::Tensor x =
        lt::Tensor::from<float>(dev(), std::vector<float>(size_t(rows * 3), 1.0f), {rows, 3});
    return x.sum({0}).all_reduce().to_vector<float>();
  };
  // 2w+1 rows split as one batch: the first rank takes one more.
  const int64_t global = 2 * w + 1, mine = global / w + (r < global % w ? 1 : 0);
  EXPECT_EQ(step(mine), std::vector<float>(3, static_cast<float>(global)));
  EXPECT_EQ(step(mine), std::vector<float>(3, static_cast<float>(global)));  // checked before
  if (w < 2) return;
  lt::Error e = error_of([&] { (void)step(4 + 4 * r); });  // 4 rows on rank 0, 8 on rank 1
  EXPECT_EQ(e.code(), LT_STATUS_DISTRIBUTED);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("ranks traced different graphs: input 0"), std::string::npos) << msg;
  for (int64_t q = 0; q < w; ++q) {
    std::string want = "[" + std::to_string(4 + 4 * q) + ",3] on rank " + std::to_string(q);
    EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in: " << msg;
  }
  // Different dtypes of an input: the collectives' text names each rank's inputs.
  lt::Error d = error_of([&] {
    lt::Tensor x = r == 0 ? lt::Tensor::from<float>(dev(), std::vector<float>{1, 2}, {2})
                          : lt::Tensor::from<double>(dev(), std::vector<double>{1, 2}, {2});
    (void)x.sum().cast(lt::f32).all_reduce().to_vector<float>();
  });
  EXPECT_EQ(d.code(), LT_STATUS_DISTRIBUTED);
  EXPECT_NE(std::string(d.what()).find("on inputs [f64 [2]]"), std::string::npos) << d.what();
  // The group still works afterwards.
  EXPECT_EQ(step(mine), std::vector<float>(3, static_cast<float>(global)));
}

TEST(Collective, BadArgumentsAreRefusedAtTraceTimeNamingThem) {
  lt::Tensor x = lt::ones(dev(), {3});
  lt::Error root = error_of([&] { (void)x.broadcast(world()); });
  EXPECT_EQ(root.code(), LT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(
      std::string(root.what())
          .find("broadcast: root " + std::to_string(world()) + " is not a rank of the group of"),
      std::string::npos)
      << root.what();
  lt::Error dt = error_of([&] { (void)(x > 0.0).all_reduce(); });
  EXPECT_EQ(dt.code(), LT_STATUS_DTYPE_MISMATCH);
  EXPECT_NE(std::string(dt.what()).find("all_reduce"), std::string::npos) << dt.what();
  lt::Error r0 = error_of([&] { (void)lt::Tensor::scalar(dev(), 1.0).all_gather(); });
  EXPECT_EQ(r0.code(), LT_STATUS_SHAPE_MISMATCH);
  lt::Error op = error_of([&] { (void)x.all_reduce(static_cast<lt_reduce_op>(7)); });
  EXPECT_NE(std::string(op.what()).find("reduce 7 is not"), std::string::npos) << op.what();
}

// A small model's gradients: one collective per gradient (bucket of 1 byte) and one bucket
// for all of them give the same reduced gradients, and the counts say how many were traced.
TEST(Collective, BucketedGradientReductionMatchesOneCollectivePerGradient) {
  auto grads_with = [&](size_t bucket, size_t* collectives) {
    lt::nn::Linear a(dev(), 5, 4, 7), b(dev(), 4, 3, 8);
    lt::Tensor x = lt::full(dev(), {2, 5}, static_cast<double>(rank() + 1));
    lt::Tensor loss = b(a(x).tanh()).sum();
    lt::backward(loss);
    std::vector<lt::Tensor*> params = {&a.weight, &a.bias, &b.weight, &b.bias};
    const double before = rt().metric("collective.calls");
    *collectives = lt::dist::all_reduce_gradients(params, LT_REDUCE_MEAN, bucket);
    lt::sync(dev());  // one graph, as in a training step (reading one gradient at a time would
                      // recompute the shared bucket per read)
    std::vector<float> out;
    for (lt::Tensor* p : params) {
      auto g = lt::grad(*p).to_vector<float>();
      out.insert(out.end(), g.begin(), g.end());
    }
    EXPECT_EQ(rt().metric("collective.calls") - before, static_cast<double>(*collectives));
    return out;
  };
  size_t each = 0, one = 0;
  std::vector<float> per = grads_with(1, &each), bucketed = grads_with(size_t(1) << 20, &one);
  EXPECT_EQ(each, 4u);
  EXPECT_EQ(one, 1u);
  ASSERT_EQ(per.size(), bucketed.size());
  for (size_t i = 0; i < per.size(); ++i) EXPECT_FLOAT_EQ(per[i], bucketed[i]) << i;
}

// forward + backward + gradient all-reduce + update: one graph, compiled once.
TEST(Collective, ATrainingStepWithItsReductionIsOneCachedGraph) {
  lt::nn::Linear fc(dev(), 6, 2, 3);
  fc.materialize();  // the initialisation is not part of the step
  lt::optim::SGD opt(fc.parameters(), 0.1, 0.0);
  const double compiles0 = rt().metric("compiles");
  std::vector<float> losses;
  for (int step = 0; step < 4; ++step) {
    std::vector<float> xs(24, 0.1f * static_cast<float>(rank() + step + 1));
    lt::Tensor x = lt::Tensor::from(dev(), xs, {4, 6});  // data, not a constant of the graph
    lt::Tensor loss = (fc(x) * fc(x)).mean();
    lt::backward(loss);
    lt::dist::all_reduce_gradients(fc.parameters(), LT_REDUCE_MEAN);
    opt.step();
    opt.zero_grad();
    lt::Tensor global;
    {
      lt::NoGradGuard ng;
      global = loss.all_reduce(LT_REDUCE_MEAN);
    }
    lt::sync(dev());
    losses.push_back(global.item<float>());
  }
  EXPECT_EQ(rt().metric("compiles") - compiles0, 1.0);  // step 1; steps 2-4 are cache hits
  // Every rank applied the same update: the weights agree across ranks.
  std::vector<float> w = fc.weight.to_vector<float>();
  lt::Tensor spread = fc.weight.all_reduce(LT_REDUCE_MAX) - fc.weight;
  for (float d : spread.to_vector<float>()) EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(w.size(), 12u);
}

TEST(Collective, BroadcastParametersGivesEveryRankRootsWeights) {
  lt::nn::Linear fc(dev(), 3, 2, static_cast<uint64_t>(100 + rank()));  // differs per rank
  lt::dist::broadcast_parameters(fc.parameters());
  lt::nn::Linear root(dev(), 3, 2, 100);
  EXPECT_EQ(fc.weight.to_vector<float>(), root.weight.to_vector<float>());
  EXPECT_TRUE(lt::requires_grad(fc.weight));
}

TEST(Collective, InitTwiceReturnsTheSameGroup) {
  int64_t r = -1, n = -1;
  lt::check(lt_dist_init(&r, &n));
  EXPECT_EQ(r, rank());
  EXPECT_EQ(n, world());
  EXPECT_TRUE(lt::dist::initialized());
}

// Collectives are counted; on a device whose memory is not the host's (gpu_opencl) the copies
// to and from host memory count as host<->device bytes, on the others MPI works in place.
TEST(Collective, BytesAreCountedInTheMetrics) {
  const double calls = rt().metric("collective.calls"), bytes = rt().metric("collective.bytes");
  const double to = rt().metric("bytes_to_device"), from = rt().metric("bytes_from_device");
  lt::Tensor y = lt::ones(dev(), {250}).all_reduce();
  lt::sync(dev());
  EXPECT_EQ(rt().metric("collective.calls") - calls, 1.0);
  EXPECT_EQ(rt().metric("collective.bytes") - bytes, 1000.0);
  const double copies = dev().backend() == "gpu_opencl" ? 1000.0 : 0.0;
  EXPECT_EQ(rt().metric("bytes_to_device") - to, copies) << dev().name();
  EXPECT_EQ(rt().metric("bytes_from_device") - from, copies) << dev().name();
}

// ---- one process, no lt_dist_init ----

TEST(DistNoInit, CollectivesSayTheGroupIsNotInitialised) {
  EXPECT_FALSE(lt::dist::initialized());
  EXPECT_EQ(lt::dist::rank(), 0);
  EXPECT_EQ(lt::dist::world_size(), 1);
  lt::Error e = error_of([&] { (void)lt::ones(dev(), {3}).all_reduce(); });
  EXPECT_EQ(e.code(), LT_STATUS_UNSUPPORTED);
  EXPECT_NE(std::string(e.what()).find("all_reduce: the process group is not initialised (call "
                                       "lt_dist_init)"),
            std::string::npos)
      << e.what();
  // The helpers are no-ops in a group of one: a program runs unchanged without mpirun.
  lt::nn::Linear fc(dev(), 2, 2, 1);
  EXPECT_EQ(lt::dist::all_reduce_gradients(fc.parameters()), 0u);
  EXPECT_NO_THROW(lt::dist::broadcast_parameters(fc.parameters()));
}

}  // namespace

int main(int argc, char** argv) {
  bool init = true;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--no-init") == 0) init = false;
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::GTEST_FLAG(filter) = init ? "Collective.*" : "DistNoInit.*";
  if (init) {
    lt_error* e = lt_dist_init(nullptr, nullptr);
    if (e) {
      std::fprintf(stderr, "collective_test: %s\n", lt_error_message(e));
      lt_error_destroy(e);
      return 1;
    }
  }
  if (lt_dist_rank() == 0) std::printf("collective_test: device %s\n", dev().name().c_str());
  int rc = RUN_ALL_TESTS();
  if (init) {
    // A rank whose tests failed must not leave the others waiting in a collective.
    lt_error_destroy(lt_dist_finalize());
  }
  return rc;
}
