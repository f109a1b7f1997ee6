// common/sha256: FIPS 180-2 test vectors, streaming equals one-shot, files
// concatenated in order, a descriptor hashed without moving its offset.
#include "common/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mle::common {
namespace {

namespace fs = std::filesystem;

constexpr char kEmpty[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kAbc[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

struct Vector {
  std::string input;
  std::string hex;
};

std::vector<Vector> Vectors() {
  return {
      {"", kEmpty},
      {"abc", kAbc},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
}

TEST(Sha256Test, KnownVectors) {
  for (const auto& v : Vectors()) EXPECT_EQ(Sha256Hex(v.input), v.hex) << v.input.substr(0, 20);
}

TEST(Sha256Test, StreamingInPiecesEqualsOneShot) {
  for (const auto& v : Vectors()) {
    for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{100000}}) {
      Sha256 sha;
      for (size_t i = 0; i < v.input.size(); i += piece) sha.Update(absl::string_view(v.input).substr(i, piece));
      EXPECT_EQ(sha.HexDigest(), v.hex) << "pieces of " << piece;
    }
  }
}

TEST(Sha256Test, DigestStartsOver) {
  Sha256 sha;
  sha.Update("abc");
  EXPECT_EQ(sha.HexDigest(), kAbc);
  EXPECT_EQ(sha.HexDigest(), kEmpty);
  Sha256 moved = std::move(sha);
  moved.Update("abc");
  EXPECT_EQ(moved.HexDigest(), kAbc);
}

TEST(Sha256Test, IsSha256Hex) {
  struct Case {
    std::string s;
    bool is;
  };
  for (const auto& c : std::vector<Case>{{kAbc, true},
                                         {kEmpty, true},
                                         {"", false},
                                         {std::string(kAbc).substr(1), false},
                                         {std::string(kAbc) + "0", false},
                                         {"BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", false},
                                         {std::string(63, '0') + "g", false}}) {
    EXPECT_EQ(IsSha256Hex(c.s), c.is) << c.s;
  }
}

class Sha256FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "sha256_test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(Sha256FileTest, FilesConcatenatedInOrder) {
  const fs::path abc = Write("abc", "abc"), ab = Write("ab", "ab"), c = Write("c", "c");
  EXPECT_EQ(*Sha256HexOfFiles({abc}), kAbc);
  EXPECT_EQ(*Sha256HexOfFiles({ab, c}), kAbc);
  EXPECT_NE(*Sha256HexOfFiles({c, ab}), kAbc);
  EXPECT_EQ(*Sha256HexOfFiles({}), kEmpty);
  const std::string big(3 << 20, 'a');  // more than one read buffer
  EXPECT_EQ(*Sha256HexOfFiles({Write("big", big)}), Sha256Hex(big));
  auto missing = Sha256HexOfFiles({abc, dir_ / "missing"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing"), absl::string_view::npos);
  EXPECT_FALSE(Sha256HexOfFiles({dir_}).ok());  // a directory cannot be read
}

TEST_F(Sha256FileTest, DescriptorHashedWithoutMovingItsOffset) {
  const int fd = ::open(Write("f", "xxabc").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::lseek(fd, 2, SEEK_SET), 2);
  EXPECT_EQ(*Sha256HexOfFd(fd), Sha256Hex("xxabc"));
  EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 2);
  ::close(fd);
  EXPECT_FALSE(Sha256HexOfFd(-1).ok());
}

}  // namespace
}  // namespace mle::common
