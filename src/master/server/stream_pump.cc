#include "master/server/stream_pump.h"

#include <vector>

namespace herd::master {

StreamPump::StreamPump(Committer* committer) : committer_(committer) {
  if (committer_ != nullptr) listener_ = committer_->AddDurableListener([this] { Kick(); });
  thread_ = std::thread([this] { Loop(); });
}

StreamPump::~StreamPump() {
  if (committer_ != nullptr) committer_->RemoveDurableListener(listener_);
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void StreamPump::Add(std::shared_ptr<Stream> s) {
  absl::MutexLock l(&mu_);
  const Stream* key = s.get();
  streams_.emplace(key, std::move(s));
}

void StreamPump::Remove(const Stream* s) {
  std::shared_ptr<Stream> gone;  // released outside the lock
  absl::MutexLock l(&mu_);
  if (auto it = streams_.find(s); it != streams_.end()) {
    gone = std::move(it->second);
    streams_.erase(it);
  }
}

void StreamPump::Kick() {
  absl::MutexLock l(&mu_);
  kicked_ = true;
}

size_t StreamPump::size() const {
  absl::MutexLock l(&mu_);
  return streams_.size();
}

void StreamPump::Loop() {
  std::vector<std::shared_ptr<Stream>> all;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return kicked_ || stopping_; };
      // Once a second regardless: a stream whose wake-up was missed still moves.
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Seconds(1));
      if (stopping_) return;
      kicked_ = false;
      all.clear();
      all.reserve(streams_.size());
      for (const auto& [key, s] : streams_) all.push_back(s);
    }
    for (const auto& s : all) s->Pump();
  }
}

}  // namespace herd::master
