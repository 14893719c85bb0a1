// io/file_util: atomic writes (a failed writer leaves the old file and no temporary),
// errors naming the path and the OS reason, permissions kept, memory-mapped reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "linformer/error.h"
#include "linformer/file_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using lf::test::TempDir;

namespace {
std::vector<std::string> dir_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST(FileUtilTest, WriteAndReadBack) {
  TempDir tmp;
  const std::string path = tmp.file("a.txt");
  lf::write_file_atomic(path, [](std::ostream& os) { os << "hello " << 42; });
  EXPECT_EQ(lf::read_file(path), "hello 42");
  // Overwrite with a larger binary payload (crosses the internal buffer size).
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  lf::write_file_atomic(path, [&](std::ostream& os) {
    os.write(big.data(), 1000);
    os.write(big.data() + 1000, static_cast<std::streamsize>(big.size() - 1000));
  });
  EXPECT_EQ(lf::read_file(path), big);
  lf::write_file_atomic(path, std::string("short"));
  EXPECT_EQ(lf::read_file(path), "short");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"a.txt"});
}

TEST(FileUtilTest, ThrowingWriterLeavesOldFileAndNoTemporary) {
  TempDir tmp;
  const std::string path = tmp.file("ckpt.bin");
  lf::write_file_atomic(path, std::string("old content"));

  struct Boom : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  EXPECT_THROW(lf::write_file_atomic(path,
                                     [](std::ostream& os) {
                                       std::string chunk(100000, 'x');
                                       os << chunk;  // some data reaches the temporary file
                                       throw Boom("midway");
                                     }),
               Boom);
  EXPECT_EQ(lf::read_file(path), "old content");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"ckpt.bin"});

  // Same with an lf::Error thrown from inside a safetensors-style writer.
  EXPECT_THROW(lf::write_file_atomic(path,
                                     [](std::ostream& os) {
                                       os << "partial";
                                       lf::fail("bad tensor");
                                     }),
               lf::Error);
  EXPECT_EQ(lf::read_file(path), "old content");
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"ckpt.bin"});
}

TEST(FileUtilTest, FailedFirstWriteCreatesNothing) {
  TempDir tmp;
  const std::string path = tmp.file("new.bin");
  EXPECT_THROW(lf::write_file_atomic(path, [](std::ostream&) { throw std::runtime_error("x"); }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(dir_entries(tmp.path()).empty());
}

TEST(FileUtilTest, OsErrorsNamePathAndReason) {
  TempDir tmp;
  const std::string path = tmp.file("missing_dir/out.bin");
  try {
    lf::write_file_atomic(path, std::string("x"));
    ADD_FAILURE() << "write into a missing directory succeeded";
  } catch (const lf::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;
  }
  // Renaming a file over a non-empty directory fails: the temporary must be cleaned up.
  const std::string dir_path = tmp.file("occupied");
  fs::create_directories(fs::path(dir_path) / "child");
  EXPECT_THROW(lf::write_file_atomic(dir_path, std::string("x")), lf::Error);
  EXPECT_EQ(dir_entries(tmp.path()), std::vector<std::string>{"occupied"});

  try {
    lf::read_file(tmp.file("nope.txt"));
    ADD_FAILURE() << "read_file of a missing file succeeded";
  } catch (const lf::Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cannot open " + tmp.file("nope.txt") + ": " + std::strerror(ENOENT)),
              std::string::npos)
        << msg;
  }
  EXPECT_THROW(lf::read_file(tmp.path().string()), lf::Error);  // a directory
}

TEST(FileUtilTest, KeepsPermissionsOfReplacedFile) {
  TempDir tmp;
  const std::string path = tmp.file("perm.txt");
  lf::write_file_atomic(path, std::string("a"));
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  lf::write_file_atomic(path, std::string("b"));
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(lf::read_file(path), "b");
}

TEST(FileUtilTest, MappedFileViewsContent) {
  TempDir tmp;
  const std::string path = tmp.file("m.bin");
  lf::write_file_atomic(path, std::string("mapped bytes"));
  lf::MappedFile m(path);
  ASSERT_EQ(m.size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), m.size()), "mapped bytes");
  lf::MappedFile moved(std::move(m));
  EXPECT_EQ(moved.size(), 12u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(moved.data()), moved.size()), "mapped bytes");
  const std::string empty = tmp.file("empty.bin");
  lf::write_file_atomic(empty, std::string());
  lf::MappedFile e(empty);
  EXPECT_EQ(e.size(), 0u);
  EXPECT_THROW(lf::MappedFile(tmp.file("absent")), lf::Error);
}
