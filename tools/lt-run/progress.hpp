// progress.hpp — lt-run's progress display (no C++ progress-bar library is packaged in Debian
// 12): percentage, elapsed time, rate and ETA, a "compiling" state while the first step builds
// its graph, redrawn in place on a terminal and as a plain line every 10% otherwise (logs, CI,
// pipes). The rate and ETA count only the steps after the first, which carries the compile.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lt_run {

// Seconds as "m:ss", or "h:mm:ss" from an hour on.
inline std::string hms(double seconds) {
  long long s = seconds > 0 ? static_cast<long long>(seconds + 0.5) : 0;
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

// Steps `first`..`total` of a run (first > 0 when resumed from a checkpoint).
class StepBar {
 public:
  using Clock = std::chrono::steady_clock;
  StepBar(int64_t total, int64_t first = 0, bool tty = isatty(fileno(stdout)) != 0)
      : total_(total), first_(first), tty_(tty), t0_(Clock::now()) {}

  // Before the first step: its lt::sync traces, compiles and runs the step's graph, which can
  // take seconds (a cold GPU cache: tens of seconds) with nothing else to show.
  void compiling(const char* what = "the training step") {
    if (tty_) {
      std::printf("\r\033[K %s  compiling %s (the first step builds its graph)...",
                  bar(first_).c_str(), what);
    } else {
      std::printf("compiling %s (the first step builds its graph)...\n", what);
    }
    std::fflush(stdout);
  }

  // After step `done` (1-based, absolute); `extra` follows the standard fields.
  void step(int64_t done, const std::string& extra) {
    const double now = elapsed();
    if (done == first_ + 1) first_step_s_ = now;
    last_done_ = done;
    const std::string head = fields(done, now);
    if (tty_) {
      std::printf("\r\033[K %s  %s  %s", bar(done).c_str(), head.c_str(), extra.c_str());
      std::fflush(stdout);
      return;
    }
    // Off a terminal: one plain line at each 10% boundary crossed, and at the end.
    const int64_t span = total_ - first_ > 0 ? total_ - first_ : 1;
    const int64_t decile = 10 * (done - first_) / span;
    if (decile > printed_decile_ || done == total_) {
      printed_decile_ = decile;
      std::printf("progress %s  %s\n", head.c_str(), extra.c_str());
      std::fflush(stdout);
    }
  }

  // A permanent line (evaluations, epoch summaries), off the bar's line on a terminal.
  [[gnu::format(printf, 2, 3)]] void line(const char* fmt, ...) {
    if (tty_) std::printf("\r\033[K");
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
    std::fflush(stdout);
  }

  // Ends the bar's line on a terminal.
  void finish() {
    if (tty_) std::printf("\r\033[K");
    std::fflush(stdout);
  }

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  // Wall time of the first step (trace + compile + run), and of the steps after it.
  double first_step_seconds() const { return first_step_s_; }
  double steady_seconds() const { return last_done_ > first_ + 1 ? elapsed() - first_step_s_ : 0; }
  int64_t steady_steps() const { return last_done_ > first_ + 1 ? last_done_ - first_ - 1 : 0; }

 private:
  std::string bar(int64_t done) const {
    constexpr int kWidth = 24;
    const int64_t span = total_ > 0 ? total_ : 1;
    int filled = static_cast<int>(kWidth * done / span);
    std::string b(static_cast<size_t>(filled < 0 ? 0 : filled), '#');
    b.resize(kWidth, '.');
    return "[" + b + "]";
  }
  // "42% 420/1000 | 0:12 elapsed | 35.1 steps/s | ETA 0:17"
  std::string fields(int64_t done, double now) const {
    char buf[160];
    const double pct = total_ > 0 ? 100.0 * static_cast<double>(done) / total_ : 100.0;
    const int64_t steady = done - first_ - 1;  // steps after the first (compiling) one
    std::string rate = "rate -", eta = "ETA -";
    if (steady > 0 && now > first_step_s_) {
      const double r = static_cast<double>(steady) / (now - first_step_s_);
      char tmp[48];
      std::snprintf(tmp, sizeof tmp, r >= 1 ? "%.1f steps/s" : "%.2f s/step", r >= 1 ? r : 1 / r);
      rate = tmp;
      eta = "ETA " + hms(static_cast<double>(total_ - done) / r);
    }
    std::snprintf(buf, sizeof buf, "%3.0f%% %lld/%lld | %s elapsed | %s | %s", pct,
                  static_cast<long long>(done), static_cast<long long>(total_), hms(now).c_str(),
                  rate.c_str(), eta.c_str());
    return buf;
  }

  int64_t total_, first_;
  bool tty_;
  Clock::time_point t0_;
  double first_step_s_ = 0;
  int64_t last_done_ = 0;
  int64_t printed_decile_ = 0;
};

}  // namespace lt_run
