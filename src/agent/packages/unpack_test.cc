// Unpacking hostile archives (unpack.h): what tar makes is root's, read
// only and without set-id bits; special files are refused; and a root agent
// runs tar as an unprivileged account, which the kernel then holds to it.
#include "agent/packages/unpack.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

class UnpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-unpack-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
    src_ = dir_ + "/src";
    fs::create_directories(src_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Archives src_ (as it is: owners, modes, special files) to a tar.
  std::string Archive(bool gzip = false) {
    const std::string tar = dir_ + (gzip ? "/a.tar.gz" : "/a.tar");
    const std::string cmd = absl::StrCat("tar -c", gzip ? "z" : "", "f ", tar, " -C ", src_, " .");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return tar;
  }
  std::string Target() {
    const std::string out = dir_ + "/out" + std::to_string(++n_);
    fs::create_directories(out);
    return out;
  }
  static struct stat Stat(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st;
  }

  std::string dir_, src_;
  int n_ = 0;
};

TEST_F(UnpackTest, FilesAreReadOnlyForEveryoneAndLoseSetIdBits) {
  fs::create_directories(src_ + "/bin");
  std::ofstream(src_ + "/bin/tool") << "#!/bin/sh\necho hi\n";
  ASSERT_EQ(chmod((src_ + "/bin/tool").c_str(), 06777), 0);
  std::ofstream(src_ + "/data") << "x";
  ASSERT_EQ(chmod((src_ + "/data").c_str(), 0666), 0);
  ASSERT_EQ(chmod((src_ + "/bin").c_str(), 01777), 0);
  ASSERT_EQ(symlink("/etc/passwd", (src_ + "/link").c_str()), 0);
  const std::string out = Target();
  ASSERT_TRUE(Untar(Archive(), out).ok());
  EXPECT_EQ(Stat(out + "/bin/tool").st_mode & 07777, 0555u);
  EXPECT_EQ(Stat(out + "/data").st_mode & 07777, 0444u);
  EXPECT_EQ(Stat(out + "/bin").st_mode & 07777, 0755u);
  EXPECT_TRUE(S_ISLNK(Stat(out + "/link").st_mode));
  EXPECT_EQ(Stat(out).st_mode & 07777, 0755u);
}

TEST_F(UnpackTest, AFifoIsRefused) {
  ASSERT_EQ(mkfifo((src_ + "/pipe").c_str(), 0666), 0);
  absl::Status st = Untar(Archive(), Target());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "./pipe is a device, FIFO or socket")) << st;
}

TEST_F(UnpackTest, NotATarArchive) {
  std::ofstream(dir_ + "/junk.tar") << "not a tar archive at all, just words and more words to fill a block\n";
  absl::Status st = Untar(dir_ + "/junk.tar", Target());
  EXPECT_TRUE(absl::StartsWith(st.message(), "not a readable tar archive")) << st;
}

// Root only: device nodes, ownership and the account tar runs as.
class UnpackRootTest : public UnpackTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: device nodes, and an account to drop to";
    UnpackTest::SetUp();
  }
  static constexpr TaskAccount kAccount{299'990, 299'990};
};

// A package holding a device node (the machine's disk, 0666) would hand
// the device to every task that reads the package. As root, tar itself
// makes one; as the unpack account it cannot (the kernel refuses mknod),
// and with the agent's own rights the walk after tar refuses it.
TEST_F(UnpackRootTest, ADeviceNodeIsNeverMade) {
  ASSERT_EQ(mknod((src_ + "/disk").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);  // like /dev/null
  const std::string tar = Archive();
  absl::Status as_account = Untar(tar, Target(), kAccount);
  EXPECT_EQ(as_account.code(), absl::StatusCode::kFailedPrecondition) << as_account;
  EXPECT_TRUE(absl::StrContains(as_account.message(), "Cannot mknod"))
      << "tar ran with rights to make devices: " << as_account;
  absl::Status as_root = Untar(tar, Target());
  EXPECT_TRUE(absl::StrContains(as_root.message(), "./disk is a device, FIFO or socket")) << as_root;
}

TEST_F(UnpackRootTest, WhatTheAccountUnpackedBecomesRoots) {
  fs::create_directories(src_ + "/etc");
  std::ofstream(src_ + "/etc/conf") << "x";
  ASSERT_EQ(chmod((src_ + "/etc/conf").c_str(), 04755), 0);
  ASSERT_EQ(chown((src_ + "/etc/conf").c_str(), 1234, 1234), 0);
  const std::string out = Target();
  absl::Status st = Untar(Archive(/*gzip=*/true), out, kAccount);
  ASSERT_TRUE(st.ok()) << st;
  for (const std::string& p : {out, out + "/etc", out + "/etc/conf"}) {
    struct stat s = Stat(p);
    EXPECT_EQ(s.st_uid, 0u) << p;
    EXPECT_EQ(s.st_gid, 0u) << p;
  }
  EXPECT_EQ(Stat(out + "/etc/conf").st_mode & 07777, 0555u);
}

// What a subverted tar could plant: a hard link to one of root's files in
// the tree it made. The walk refuses it instead of making it root's and
// readable by everyone.
TEST_F(UnpackRootTest, AFileTheAccountDidNotMakeIsRefused) {
  const std::string out = Target();
  ASSERT_EQ(chown(out.c_str(), kAccount.uid, kAccount.gid), 0);
  std::ofstream(out + "/mine") << "x";
  ASSERT_EQ(chown((out + "/mine").c_str(), kAccount.uid, kAccount.gid), 0);
  std::ofstream(out + "/secret") << "root's";
  ASSERT_EQ(chmod((out + "/secret").c_str(), 0600), 0);
  const int fd = open(out.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  absl::Status st = SettleTree(fd, kAccount.uid);
  close(fd);
  EXPECT_TRUE(absl::StrContains(st.message(), "./secret is not owned by the unpack account")) << st;
  EXPECT_EQ(Stat(out + "/secret").st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace herd::agent
