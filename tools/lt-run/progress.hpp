// progress.hpp — lt-run's tiny progress bar: redraws one line in place when stdout is a
// terminal, and prints one plain line per epoch otherwise (logs, CI, pipes).
#pragma once

#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lt_run {

class Progress {
 public:
  Progress(int64_t epochs, int64_t steps_per_epoch)
      : epochs_(epochs), steps_(steps_per_epoch), tty_(isatty(fileno(stdout)) != 0) {}

  // After step `step` (0-based) of `epoch` (1-based) with the running mean loss.
  void step(int64_t epoch, int64_t step, double mean_loss) {
    if (!tty_) return;
    constexpr int kWidth = 30;
    int64_t done = step + 1;
    int filled = static_cast<int>(kWidth * done / (steps_ > 0 ? steps_ : 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::printf("\r epoch %3lld/%lld [%s] %4lld/%lld  loss %.4f", static_cast<long long>(epoch),
                static_cast<long long>(epochs_), bar.c_str(), static_cast<long long>(done),
                static_cast<long long>(steps_), mean_loss);
    std::fflush(stdout);
  }

  // At the end of an epoch: the line is finished (TTY) or printed once (otherwise).
  void epoch_done(int64_t epoch, double mean_loss, double seconds) {
    if (tty_) {
      std::printf("\r\033[K");
    }
    std::printf(" epoch %3lld/%lld  loss %.4f  (%.2f s)\n", static_cast<long long>(epoch),
                static_cast<long long>(epochs_), mean_loss, seconds);
    std::fflush(stdout);
  }

 private:
  int64_t epochs_, steps_;
  bool tty_;
};

// A step-based bar for long runs (GPT training): steps, loss, learning rate and tokens/s,
// redrawn in place on a terminal; line() prints a permanent line (evaluations) either way.
class StepBar {
 public:
  explicit StepBar(int64_t steps) : steps_(steps), tty_(isatty(fileno(stdout)) != 0) {}
  void step(int64_t done, double loss, double lr, double tokens_per_s) {
    if (!tty_) return;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * done / (steps_ > 0 ? steps_ : 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::printf("\r [%s] %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s", bar.c_str(),
                static_cast<long long>(done), static_cast<long long>(steps_), loss, lr,
                tokens_per_s);
    std::fflush(stdout);
  }
  [[gnu::format(printf, 2, 3)]] void line(const char* fmt, ...) {
    if (tty_) std::printf("\r\033[K");
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
    std::fflush(stdout);
  }

 private:
  int64_t steps_;
  bool tty_;
};

}  // namespace lt_run
