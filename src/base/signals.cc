#include "base/signals.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <mutex>

namespace herd {
namespace {

sem_t g_sem;
std::once_flag g_sem_once;
volatile sig_atomic_t g_signal = 0;

void OnStopSignal(int sig) {
  if (g_signal == 0) g_signal = sig;
  sem_post(&g_sem);  // async-signal-safe
}

void InitSemaphore() {
  std::call_once(g_sem_once, [] { sem_init(&g_sem, 0, 0); });
}

void Handle(int sig) {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

std::atomic<bool> g_installed{false};

}  // namespace

void InstallStopSignalHandlers(Hangup hangup) {
  InitSemaphore();
  Handle(SIGINT);
  Handle(SIGTERM);
  if (hangup == Hangup::kStop) Handle(SIGHUP);
  if (hangup == Hangup::kIgnore) signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  g_installed = true;
}

int WaitForStopSignal(int64_t timeout_ms) {
  if (!g_installed) InstallStopSignalHandlers();
  if (g_signal != 0) return g_signal;
  if (timeout_ms < 0) {
    while (sem_wait(&g_sem) != 0 && errno == EINTR) {
    }
  } else {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1'000'000;
    if (until.tv_nsec >= 1'000'000'000) {
      until.tv_sec += 1;
      until.tv_nsec -= 1'000'000'000;
    }
    while (sem_clockwait(&g_sem, CLOCK_MONOTONIC, &until) != 0) {
      if (errno == ETIMEDOUT) return g_signal;
    }
  }
  // Leave the latch visible to every other waiter.
  sem_post(&g_sem);
  return g_signal;
}

bool StopSignalReceived() { return g_signal != 0; }

}  // namespace herd
