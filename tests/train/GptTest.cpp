// GptTest.cpp — the character-level GPT of models/gpt.hpp and its text data (text.hpp):
// corpus reading and vocabulary, seeded batches, causality, the key/value cache agreeing with
// a full forward pass on every built backend, and a few training steps lowering the loss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lazytensor/autograd.hpp"
#include "lazytensor/lazytensor.hpp"
#include "lazytensor/models/gpt.hpp"
#include "lazytensor/models/train_step.hpp"
#include "lazytensor/optim.hpp"
#include "lazytensor/text.hpp"
#include "test_support.hpp"

namespace {

lt::Runtime& runtime() {
  return lt::test::no_fallback_runtime();
}

lt::models::GptConfig tiny(int64_t vocab) {
  lt::models::GptConfig c;
  c.vocab = vocab;
  c.context = 16;
  c.layers = 2;
  c.dim = 32;
  c.heads = 4;
  c.dropout = 0.0;
  c.seed = 7;
  return c;
}

TEST(Text, VocabularyRoundTripsAndNamesUnknownCharacters) {
  lt::text::Vocab v("hello world");
  EXPECT_EQ(v.size(), 8);  // " dehlorw"
  EXPECT_EQ(v.chars(), " dehlorw");
  std::vector<int64_t> ids = v.encode("hold");
  std::string back;
  for (int64_t id : ids) back.push_back(v.chr(id));
  EXPECT_EQ(back, "hold");
  try {
    v.encode("hex");
    FAIL() << "encoded a character outside the vocabulary";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lt::text::Vocab::from_chars(v.chars()).encode("hold"), ids);
}

TEST(Text, FortuneFilesBecomeTextWithoutSeparatorsIndexesOrArt) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("lt_text_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string a = "The quick brown fox.\n%\n", b;
  for (int i = 0; i < 100; ++i) b += "Jumps over the lazy dog " + std::to_string(i) + ".\n%\n";
  std::ofstream(dir / "animals") << a;
  std::ofstream(dir / "dogs") << b;
  std::ofstream(dir / "dogs.dat") << "\x01\x02 binary index";
  std::ofstream(dir / "ascii-art") << "#####\n";
  fs::create_symlink(dir / "dogs", dir / "dogs.u8");
  std::string text = lt::text::load_corpus(dir.string());
  EXPECT_EQ(text.rfind("The quick brown fox.\n\nJumps over the lazy dog 0.\n\n", 0), 0u);
  EXPECT_EQ(text.find('%'), std::string::npos);
  EXPECT_EQ(text.find('#'), std::string::npos);
  EXPECT_EQ(text.find("binary"), std::string::npos);
  EXPECT_EQ(text.find("dog 0."), text.rfind("dog 0."));  // the .u8 link is not read twice
  fs::remove_all(dir);

  try {
    lt::text::load_corpus("/nonexistent/corpus");
    FAIL();
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus"), std::string::npos);
  }
}

TEST(Text, TheDefaultCorpusIsInstalledEnglish) {
  // tools/install-deps.sh installs Debian's fortunes package; this is the GPT's data.
  std::string text = lt::text::load_corpus();
  EXPECT_GT(text.size(), 1'000'000u);
  EXPECT_NE(text.find(" the "), std::string::npos);
  lt::text::Corpus c = lt::text::Corpus::from_text(text, 0.1);
  EXPECT_LT(c.vocab.size(), 256);
  EXPECT_NEAR(static_cast<double>(c.val.size()) / static_cast<double>(text.size()), 0.1, 1e-3);
}

TEST(Text, BatchesAreSeededWindowsWithShiftedTargets) {
  std::vector<int64_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i % 97);
  lt::Device dev = runtime().find_device("cpu_eager");
  auto [x1, y1] = lt::text::sample_batch(dev, tokens, 4, 8, 3, 5);
  auto [x2, y2] = lt::text::sample_batch(dev, tokens, 4, 8, 3, 5);
  auto [x3, y3] = lt::text::sample_batch(dev, tokens, 4, 8, 3, 6);
  EXPECT_EQ(x1.shape(), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(y1.shape(), (std::vector<int64_t>{32}));
  std::vector<int64_t> a = x1.to_vector<int64_t>(), t = y1.to_vector<int64_t>();
  EXPECT_EQ(a, x2.to_vector<int64_t>());
  EXPECT_NE(a, x3.to_vector<int64_t>());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(t[i], (a[i] + 1) % 97) << i;
}

TEST(Text, ShardsAreTheRowsOfTheGlobalBatch) {
  std::vector<int64_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i % 97);
  lt::Device dev = runtime().find_device("cpu_eager");
  std::vector<int64_t> whole =
      lt::text::sample_batch(dev, tokens, 5, 8, 3, 5).first.to_vector<int64_t>();
  std::vector<int64_t> joined;
  for (int64_t r = 0; r < 2; ++r) {
    auto [x, y] = lt::text::sample_batch(dev, tokens, 5, 8, 3, 5, lt::data::Shard{r, 2});
    EXPECT_EQ(x.dim(0), r == 0 ? 3 : 2);
    EXPECT_EQ(y.dim(0), x.dim(0) * 8);
    auto v = x.to_vector<int64_t>();
    joined.insert(joined.end(), v.begin(), v.end());
  }
  EXPECT_EQ(joined, whole);
}

// A shard's dropout mask is its rows of the mask of the global batch (counter-based random
// numbers from the shard's first element), so dropout does not break data-parallel runs.
TEST(Dropout, AShardsMaskIsItsRowsOfTheGlobalBatchsMask) {
  lt::Device dev = runtime().find_device("cpu_eager");
  lt::nn::Dropout whole(0.5, 11), part(0.5, 11);
  std::vector<float> all = whole(lt::ones(dev, {6, 5})).to_vector<float>();
  part.set_shard(2);
  std::vector<float> rows = part(lt::ones(dev, {4, 5})).to_vector<float>();
  EXPECT_EQ(rows, std::vector<float>(all.begin() + 10, all.end()));
  EXPECT_NE(std::vector<float>(all.begin(), all.begin() + 20), rows);  // not the first rows
}

// Logits of a full forward pass over `tokens` [1, T].
std::vector<float> full_logits(lt::models::Gpt& m, const lt::Device& dev,
                               const std::vector<int64_t>& tokens) {
  lt::NoGradGuard ng;
  return m(lt::Tensor::from(dev, tokens, {1, static_cast<int64_t>(tokens.size())}))
      .to_vector<float>();
}

TEST(Gpt, LogitsOfAPositionDoNotDependOnLaterTokens) {
  lt::Device dev = runtime().find_device("cpu_eager");
  lt::models::Gpt m(dev, tiny(11));
  m.eval();
  std::vector<int64_t> a = {1, 2, 3, 4, 5, 6}, b = {1, 2, 3, 9, 9, 9};
  std::vector<float> la = full_logits(m, dev, a), lb = full_logits(m, dev, b);
  for (size_t i = 0; i < 3 * 11; ++i) EXPECT_FLOAT_EQ(la[i], lb[i]) << i;
  bool differs = false;
  for (size_t i = 3 * 11; i < la.size(); ++i) differs = differs || la[i] != lb[i];
  EXPECT_TRUE(differs);
}

class GptCache : public lt::test::BackendTest {
 protected:
  GptCache() : BackendTest(lt::test::with_fallback("error")) {}
};

TEST_P(GptCache, IncrementalDecodingMatchesTheFullPass) {
  const lt::Device& dev = dev_;
  lt::models::Gpt m(dev, tiny(13));
  m.eval();
  std::vector<int64_t> seq = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  std::vector<float> full = full_logits(m, dev, seq);
  lt::NoGradGuard ng;
  lt::models::KVCache cache;
  // A 4-token prompt, then one token at a time.
  std::vector<int64_t> prompt(seq.begin(), seq.begin() + 4);
  std::vector<float> got = m(lt::Tensor::from(dev, prompt, {1, 4}), &cache).to_vector<float>();
  for (size_t t = 4; t < seq.size(); ++t) {
    std::vector<int64_t> one = {seq[t]};
    std::vector<float> step = m(lt::Tensor::from(dev, one, {1, 1}), &cache).to_vector<float>();
    got.insert(got.end(), step.begin(), step.end());
  }
  EXPECT_EQ(cache.length, static_cast<int64_t>(seq.size()));
  ASSERT_EQ(got.size(), full.size());
  const double tol = GetParam() == "tpu_sim" ? 3e-2 : 1e-4;
  EXPECT_TRUE(lt::test::all_close(got, full, tol));
  // The context bounds the cache.
  std::vector<int64_t> more(7, 1);
  EXPECT_THROW(m(lt::Tensor::from(dev, more, {1, 7}), &cache), lt::Error);
}
// Every cache length is a new shape and so a new compile (dynamic shapes are issue #15). On
// gpu_opencl each is a cold PoCL build of ~30-40 s on a 2-core CI machine, so this test would
// take 5 minutes there; it ran by hand on gpu_opencl (agreeing to 1e-4) and joins this list
// once lengths stop recompiling.
std::vector<std::string> cache_backends() {
  std::vector<std::string> out;
  for (const std::string& b : lt::test::built_backends())
    if (b != "gpu_opencl") out.push_back(b);
  return out;
}
LT_INSTANTIATE_PER_BACKEND(GptCache, cache_backends());

TEST(Gpt, TrainingStepsCompileOnceAndLowerTheLoss) {
  lt::Device dev = runtime().find_device("cpu_eager");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat. ";
  lt::text::Corpus corpus = lt::text::Corpus::from_text(text, 0.2);
  lt::models::GptConfig c = tiny(corpus.vocab.size());
  c.dropout = 0.1;
  lt::models::GptTraining gpt(dev, c, [](std::vector<lt::Tensor*> params) {
    return std::make_unique<lt::optim::Adam>(std::move(params), 3e-3);
  });
  double compiles = 0, first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    lt::Tensor loss = gpt.step(corpus.train, 8, 1, static_cast<uint64_t>(step)).loss;
    if (step == 1) compiles = runtime().metric("compiles");
    (step == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_EQ(runtime().metric("compiles"), compiles) << "a later step compiled again";
  EXPECT_NEAR(first, std::log(static_cast<double>(c.vocab)), 0.5);  // about uniform at first
  EXPECT_LT(last, 0.5 * first);
}

}  // namespace
