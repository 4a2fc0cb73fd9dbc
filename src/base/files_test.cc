#include "base/files.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace herd {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd_files_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/sandbox");
    fs::create_directories(dir_ + "/outside");
    std::ofstream(dir_ + "/outside/secret") << "s3cret";
    auto fd = OpenDirectory(dir_ + "/sandbox");
    ASSERT_TRUE(fd.ok()) << fd.status();
    sandbox_ = *std::move(fd);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  Fd sandbox_;
};

TEST_F(FilesTest, OpenBeneathOpensPlainPaths) {
  fs::create_directories(dir_ + "/sandbox/a/b");
  std::ofstream(dir_ + "/sandbox/a/b/f") << "x";
  auto f = OpenBeneath(sandbox_.get(), "a/./b/f", O_RDONLY);
  ASSERT_TRUE(f.ok()) << f.status();
  char c = 0;
  EXPECT_EQ(read(f->get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
  auto self = OpenBeneath(sandbox_.get(), "", O_RDONLY);
  EXPECT_TRUE(self.ok());
}

TEST_F(FilesTest, OpenBeneathRefusesSymlinksDotDotAndAbsolutePaths) {
  fs::create_directories(dir_ + "/sandbox/a");
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/sandbox/a/link");
  fs::create_symlink(dir_ + "/outside/secret", dir_ + "/sandbox/file_link");
  fs::create_directory_symlink("../outside", dir_ + "/sandbox/rel_link");

  for (const char* rel : {"a/link/secret", "a/link", "file_link", "rel_link/secret"}) {
    auto fd = OpenBeneath(sandbox_.get(), rel, O_RDONLY);
    EXPECT_FALSE(fd.ok()) << rel;
    EXPECT_TRUE(absl::IsFailedPrecondition(fd.status())) << rel << ": " << fd.status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(OpenBeneath(sandbox_.get(), "../outside/secret", O_RDONLY).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(OpenBeneath(sandbox_.get(), "a/../../outside", O_RDONLY).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(OpenBeneath(sandbox_.get(), "/etc/passwd", O_RDONLY).status()));
}

TEST_F(FilesTest, MakeDirsBeneathCreatesAndRefusesASymlinkComponent) {
  auto made = MakeDirsBeneath(sandbox_.get(), "a/b/c", 0750);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st;
  ASSERT_EQ(fstat(made->get(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_TRUE(fs::is_directory(dir_ + "/sandbox/a/b/c"));
  // Again: existing directories are fine.
  EXPECT_TRUE(MakeDirsBeneath(sandbox_.get(), "a/b/c", 0750).ok());

  // The task replaces `x` with a symlink out of its sandbox.
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/sandbox/x");
  auto refused = MakeDirsBeneath(sandbox_.get(), "x/y", 0755);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_FALSE(fs::exists(dir_ + "/outside/y"));
  // A file where a directory should be.
  std::ofstream(dir_ + "/sandbox/file") << "";
  EXPECT_TRUE(absl::IsFailedPrecondition(MakeDirsBeneath(sandbox_.get(), "file/z", 0755).status()));
}

TEST_F(FilesTest, RemoveTreeAtNeverLeavesTheDirectory) {
  fs::create_directories(dir_ + "/sandbox/t/d/e");
  std::ofstream(dir_ + "/sandbox/t/d/e/f") << "";
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/sandbox/t/d/out");
  fs::create_symlink(dir_ + "/outside/secret", dir_ + "/sandbox/t/s");
  ASSERT_TRUE(RemoveTreeAt(sandbox_.get(), "t").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/sandbox/t"));
  EXPECT_TRUE(fs::exists(dir_ + "/outside/secret"));
  EXPECT_TRUE(RemoveTreeAt(sandbox_.get(), "missing").ok());
  EXPECT_FALSE(RemoveTreeAt(sandbox_.get(), "../outside").ok());
  EXPECT_TRUE(fs::exists(dir_ + "/outside/secret"));
}

TEST_F(FilesTest, ReplaceWithSymlinkAtReplacesWhateverIsThere) {
  fs::create_directories(dir_ + "/sandbox/pkgdir/inner");
  std::ofstream(dir_ + "/sandbox/pkgfile") << "";
  fs::create_symlink(dir_ + "/outside/secret", dir_ + "/sandbox/pkglink");
  for (const char* name : {"pkgdir", "pkgfile", "pkglink", "fresh"}) {
    ASSERT_TRUE(ReplaceWithSymlinkAt(sandbox_.get(), name, "/target").ok()) << name;
    EXPECT_EQ(fs::read_symlink(dir_ + "/sandbox/" + name), "/target") << name;
  }
  EXPECT_TRUE(fs::exists(dir_ + "/outside/secret"));
  EXPECT_FALSE(fs::is_symlink(dir_ + "/outside/secret"));
  EXPECT_FALSE(ReplaceWithSymlinkAt(sandbox_.get(), "a/b", "/target").ok());
}

// A hostile task swaps a directory of its sandbox for a symlink out of it,
// over and over, while the agent makes and opens the working directory:
// every attempt either works inside the sandbox or fails; none creates
// anything outside.
TEST_F(FilesTest, MakeDirsBeneathUnderARaceNeverLandsOutside) {
  std::atomic<bool> stop{false};
  const std::string a = dir_ + "/sandbox/a";
  const std::string link = dir_ + "/sandbox/link";
  fs::create_directories(a);
  fs::create_directory_symlink(dir_ + "/outside", link);
  std::thread racer([&] {
    // Swap `a` (a real directory) and the symlink, atomically, the way a
    // task would: there is never a moment without an `a`.
    for (int i = 0; i < 20000000 && !stop.load(); ++i) {
      renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, link.c_str(), RENAME_EXCHANGE);
    }
  });
  // Until both outcomes were seen (the race is real), bounded.
  int ok = 0, refused = 0;
  for (int i = 0; i < 200000 && (ok < 100 || refused < 100); ++i) {
    auto fd = MakeDirsBeneath(sandbox_.get(), "a/b", 0755);
    if (fd.ok()) {
      ++ok;
      fchmod(fd->get(), 0755);  // what the agent would do with what it holds
    } else {
      ++refused;
    }
  }
  stop = true;
  racer.join();
  EXPECT_FALSE(fs::exists(dir_ + "/outside/b"));
  EXPECT_GT(refused, 0);
  EXPECT_GT(ok, 0);
}

TEST_F(FilesTest, DiskUsageAtCountsHardLinksOnceAndFollowsNoSymlink) {
  fs::create_directories(dir_ + "/sandbox/t/d");
  std::ofstream(dir_ + "/sandbox/t/d/big") << std::string(1 << 20, 'x');
  fs::create_hard_link(dir_ + "/sandbox/t/d/big", dir_ + "/sandbox/t/link");
  std::ofstream(dir_ + "/outside/huge") << std::string(4 << 20, 'y');
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/sandbox/t/out");
  auto used = DiskUsageAt(sandbox_.get(), "t");
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_GE(*used, 1 << 20);
  EXPECT_LT(*used, (1 << 20) + (256 << 10)) << "counted the hard link twice or followed the symlink";
  EXPECT_FALSE(DiskUsageAt(sandbox_.get(), "../outside").ok());
}

TEST_F(FilesTest, WriteFileAtomicSetsItsModeWhateverTheUmask) {
  mode_t old = umask(0);
  const std::string path = dir_ + "/sandbox/secret.pb";
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  umask(old);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_TRUE(WriteFileAtomic(path, "two", {.mode = 0644, .durable = false}).ok());
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "two");
  // No temporary file left behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_ + "/sandbox")) entries += e.path().filename() == "secret.pb" ? 0 : 1;
  EXPECT_EQ(entries, 0);
}

}  // namespace
}  // namespace herd
