// LogReader against rotation done as herd-shim does it, in-process (exact
// interleavings) and by a real shim under a real Supervisor.
#include "agent/supervisor/log_reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/supervisor/testing.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

// Writes and rotates a stream the way herd-shim's LogStream does.
class Writer {
 public:
  Writer(std::string path, int keep) : path_(std::move(path)), keep_(keep) { Open(); }
  ~Writer() { close(fd_); }
  void Write(const std::string& s) {
    ASSERT_EQ(write(fd_, s.data(), s.size()), static_cast<ssize_t>(s.size()));
    all_ += s;
  }
  void Rotate() {
    close(fd_);
    if (keep_ <= 0) {
      unlink(path_.c_str());
    } else {
      unlink(absl::StrCat(path_, ".", keep_).c_str());
      for (int k = keep_ - 1; k >= 1; --k) {
        rename(absl::StrCat(path_, ".", k).c_str(), absl::StrCat(path_, ".", k + 1).c_str());
      }
      rename(path_.c_str(), (path_ + ".1").c_str());
    }
    Open();
  }
  const std::string& all() const { return all_; }

 private:
  void Open() { fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644); }
  std::string path_;
  int keep_;
  int fd_ = -1;
  std::string all_;
};

std::string ReadAll(LogReader& r) {
  std::string out;
  while (true) {
    absl::StatusOr<size_t> n = r.Read(&out, 7);  // small reads: many steps
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) return out;
  }
}

class LogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-log-reader-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/stdout";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(LogReaderTest, MissingLogIsNotFound) {
  EXPECT_EQ(LogReader::Open(path_, 0).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LogReaderTest, TailReadsAcrossRotatedFilesOldestFirst) {
  Writer w(path_, 3);
  w.Write("aaaa");
  w.Rotate();
  w.Write("bbbb");
  w.Rotate();
  w.Write("cc");
  for (auto [tail, want] : std::vector<std::pair<int64_t, std::string>>{
           {0, "aaaabbbbcc"}, {100, "aaaabbbbcc"}, {10, "aaaabbbbcc"}, {5, "bbbcc"}, {6, "bbbbcc"}, {2, "cc"},
           {1, "c"}, {7, "abbbbcc"}}) {
    absl::StatusOr<LogReader> r = LogReader::Open(path_, tail);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ReadAll(*r), want) << "tail " << tail;
  }
}

TEST_F(LogReaderTest, FollowsRotationBetweenReads) {
  Writer w(path_, 2);
  w.Write("start\n");
  absl::StatusOr<LogReader> r = LogReader::Open(path_, 0);
  ASSERT_TRUE(r.ok());
  std::string got = ReadAll(*r);
  for (int i = 0; i < 50; ++i) {
    w.Write(absl::StrCat("line ", i, "\n"));
    if (i % 3 == 0) got += ReadAll(*r);  // sometimes mid-file
    w.Write(absl::StrCat("more ", i, "\n"));
    w.Rotate();
    if (i % 2 == 0) got += ReadAll(*r);  // sometimes right after a rotation, sometimes after the next writes
  }
  w.Write("end\n");
  got += ReadAll(*r);
  EXPECT_EQ(got, w.all());
}

TEST_F(LogReaderTest, SeveralRotationsBetweenReadsLoseNothingKept) {
  Writer w(path_, 4);
  absl::StatusOr<LogReader> r = LogReader::Open(path_, 0);
  ASSERT_TRUE(r.ok());
  std::string got;
  for (int round = 0; round < 10; ++round) {
    // Three rotations: the file the reader was at is now path.3 (of 4).
    for (int i = 0; i < 3; ++i) {
      w.Write(absl::StrCat("r", round, " f", i, "\n"));
      w.Rotate();
    }
    w.Write(absl::StrCat("r", round, " live\n"));
    got += ReadAll(*r);
  }
  EXPECT_EQ(got, w.all());
}

TEST_F(LogReaderTest, AFileDeletedWhileBeingReadIsFinished) {
  Writer w(path_, 1);
  w.Write("first file\n");
  absl::StatusOr<LogReader> r = LogReader::Open(path_, 0);
  ASSERT_TRUE(r.ok());
  std::string got;
  ASSERT_TRUE(r->Read(&got, 6).ok());  // "first "
  w.Rotate();                          // first -> .1
  w.Write("second\n");
  w.Rotate();  // first deleted, second -> .1
  w.Write("third\n");
  got += ReadAll(*r);
  EXPECT_EQ(got, "first file\nsecond\nthird\n") << "the open file is finished, then the newer ones in order";
}

TEST_F(LogReaderTest, FallingBehindSkipsOnlyWhatWasDeletedUnread) {
  Writer w(path_, 1);
  w.Write("a\n");
  absl::StatusOr<LogReader> r = LogReader::Open(path_, 0);
  ASSERT_TRUE(r.ok());
  std::string got = ReadAll(*r);  // at the end of "a"
  w.Rotate();
  w.Write("b\n");
  w.Rotate();  // "a" deleted (still open here), "b" is .1
  w.Write("c\n");
  w.Rotate();  // "b" deleted unread, "c" is .1
  w.Write("d\n");
  got += ReadAll(*r);
  EXPECT_EQ(got, "a\nc\nd\n");
}

TEST_F(LogReaderTest, NoRotationKeepFollowsTheNewFile) {
  Writer w(path_, 0);  // --log-keep 0: the full file is deleted
  w.Write("x\n");
  absl::StatusOr<LogReader> r = LogReader::Open(path_, 0);
  ASSERT_TRUE(r.ok());
  std::string got = ReadAll(*r);
  w.Write("y\n");
  w.Rotate();
  w.Write("z\n");
  got += ReadAll(*r);
  EXPECT_EQ(got, "x\ny\nz\n");
}

TEST_F(LogReaderTest, TruncationStartsOver) {
  std::ofstream(path_) << "0123456789";
  absl::StatusOr<LogReader> r = LogReader::Open(path_, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ReadAll(*r), "0123456789");
  std::ofstream(path_, std::ios::trunc) << "new";
  EXPECT_EQ(ReadAll(*r), "new");
}

// A real task writing numbered lines through a real shim rotating at 4 KB,
// followed while it writes: every line once, in order.
class LogReaderShimTest : public SupervisorFixture {};

TEST_F(LogReaderShimTest, FollowingARotatingTaskDropsAndRepeatsNothing) {
  Supervisor::Options opts;
  opts.log_max_bytes = 4096;
  // More rotated files kept than the task makes: on a busy machine the
  // reader may fall any number of rotations behind, and a file deleted by
  // retention before it was read is lost by design, not by the reader.
  opts.log_keep = 200;
  sup_ = New(opts);
  constexpr int kLines = 3000;  // ~300 KB: ~75 rotations
  v1::TaskRun run = Sh("logs.follow", absl::StrCat("i=0; while [ $i -lt ", kLines,
                                                   " ]; do printf '%099d\\n' $i; i=$((i+1)); done"));
  sup_->SetDesired({run});
  std::string path = RunDirOf(run.run_id()) + "/stdout";
  int64_t deadline = NowMs() + 10'000;
  absl::StatusOr<LogReader> r = absl::NotFoundError("");
  while (!r.ok() && NowMs() < deadline) {
    r = LogReader::Open(path, 0);
    if (!r.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(r.ok()) << r.status();
  std::string got;
  bool ended = false;
  while (NowMs() < deadline) {
    absl::StatusOr<size_t> n = r->Read(&got, 1 << 16);
    ASSERT_TRUE(n.ok()) << n.status();
    if (*n > 0) continue;
    if (ended) break;  // one more pass after the task ended
    std::optional<v1::RunStatus> s = Find(*sup_, run.run_id());
    ended = s && s->terminal();
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::string> lines = absl::StrSplit(got, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(kLines));
  for (int i = 0; i < kLines; ++i) {
    int64_t v = -1;
    ASSERT_TRUE(absl::SimpleAtoi(lines[i], &v)) << lines[i];
    ASSERT_EQ(v, i) << "line " << i;
  }
  EXPECT_TRUE(std::filesystem::exists(path + ".50") || std::filesystem::exists(path + ".10"))
      << "the test should have seen many rotations";
}

}  // namespace
}  // namespace herd::agent
