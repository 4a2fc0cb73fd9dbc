#include "store/group_commit.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/check.h"

namespace herd::store {

GroupCommitLog::GroupCommitLog(LogStore* store, Options opts) : store_(store), opts_(opts) {
  HERD_CHECK(store_ != nullptr);
  HERD_CHECK(opts_.max_batch > 0);
  absl::StatusOr<int64_t> last = store_->LastRevision();
  {
    absl::MutexLock lock(&mu_);
    if (last.ok()) {
      durable_.store(*last, std::memory_order_release);
      last_queued_ = *last;
    } else {
      error_ = last.status();
    }
  }
  writer_ = std::thread([this] { WriterLoop(); });
}

GroupCommitLog::~GroupCommitLog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  // Wake waiters for revisions that will never come and let them leave
  // before the mutex they wait on is destroyed.
  mu_.Await(absl::Condition(
      +[](int* waiters) { return *waiters == 0; }, &waiters_));
}

void GroupCommitLog::Enqueue(std::vector<v1::Mutation> mutations) {
  if (mutations.empty()) return;
  absl::MutexLock lock(&mu_);
  if (!error_.ok() || stopping_) return;
  HERD_DCHECK(mutations.front().revision() == last_queued_ + 1);
  last_queued_ = mutations.back().revision();
  if (queue_.empty()) {
    queue_ = std::move(mutations);
  } else {
    queue_.insert(queue_.end(), std::make_move_iterator(mutations.begin()),
                  std::make_move_iterator(mutations.end()));
  }
}

absl::Status GroupCommitLog::WaitDurable(int64_t revision) {
  if (DurableRevision() >= revision) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  ++waiters_;
  auto ready = [this, revision]() {
    return DurableRevision() >= revision || !error_.ok() || stopped_;
  };
  mu_.Await(absl::Condition(&ready));
  --waiters_;
  if (DurableRevision() >= revision) return absl::OkStatus();
  if (!error_.ok()) return error_;
  return absl::UnavailableError(
      absl::StrCat("group commit log stopped before revision ", revision, " was queued"));
}

absl::Status GroupCommitLog::status() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

void GroupCommitLog::SetOnDurable(std::function<void(int64_t)> fn) {
  absl::MutexLock lock(&mu_);
  on_durable_ = std::move(fn);
}

void GroupCommitLog::WriterLoop() {
  std::vector<v1::Mutation> batch;
  for (;;) {
    std::function<void(int64_t)> on_durable;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&has_work));
      if (queue_.empty() || !error_.ok()) return;  // stopping, and flushed
      batch.clear();
      if (queue_.size() <= opts_.max_batch) {
        batch.swap(queue_);
      } else {
        auto end = queue_.begin() + static_cast<std::ptrdiff_t>(opts_.max_batch);
        batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(end));
        queue_.erase(queue_.begin(), end);
      }
      on_durable = on_durable_;
    }
    absl::Status st = store_->Append(batch);
    const int64_t revision = batch.back().revision();
    {
      absl::MutexLock lock(&mu_);
      if (!st.ok()) {
        error_ = absl::Status(
            st.code(), absl::StrCat("durable log failed at revisions ", batch.front().revision(),
                                    "..", revision, ": ", st.message()));
        queue_.clear();
        return;  // waiters wake on error_
      }
      durable_.store(revision, std::memory_order_release);
    }
    if (on_durable) on_durable(revision);
  }
}

}  // namespace herd::store
