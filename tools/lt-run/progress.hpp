// progress.hpp — lt-run's tiny progress bar: redraws one line in place when stdout is a
// terminal, and prints one plain line per epoch otherwise (logs, CI, pipes).
#pragma once

#include <unistd.h>

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

}  // namespace lt_run
