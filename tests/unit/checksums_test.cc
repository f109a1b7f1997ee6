#include "common/checksums.h"

#include <gtest/gtest.h>

#include <string>

namespace mle::common {
namespace {

// Known answers: RFC 3720 / the CRC catalogue for CRC32C, RFC 1321 for MD5,
// and the base64 forms Cloud Storage shows for the same bytes.
struct Vector {
  std::string data;
  uint32_t crc32c;
  std::string crc32c_b64;
  std::string md5_b64;
};

TEST(ChecksumsTest, KnownVectors) {
  const Vector rows[] = {
      {"", 0x00000000, "AAAAAA==", "1B2M2Y8AsgTpgAmY7PhCfg=="},
      {"123456789", 0xE3069283, "4waSgw==", "JfnnlDI7RTiF9RgfG2JNCw=="},
      {"hello world", 0xC99465AA, "yZRlqg==", "XrY7u+Ae7tCTyyK7j1rNww=="},
      {std::string(32, '\0'), 0x8A9136AA, "ipE2qg==", "cLyPS3KoaSFGi/joRB3OUQ=="},
  };
  for (const Vector& v : rows) {
    SCOPED_TRACE(v.data);
    EXPECT_EQ(Crc32c(v.data), v.crc32c);
    const Checksums c = ChecksumsOf(v.data);
    EXPECT_EQ(c.crc32c, v.crc32c);
    EXPECT_EQ(Crc32cBase64(c.crc32c), v.crc32c_b64);
    EXPECT_EQ(Md5Base64(c), v.md5_b64);
    EXPECT_EQ(Crc32cFromBase64(v.crc32c_b64), v.crc32c);
    EXPECT_EQ(Md5FromBase64(v.md5_b64), c.md5);
  }
}

TEST(ChecksumsTest, PiecesEqualTheWhole) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7 + i / 13));
  Checksummer c;
  for (size_t at = 0; at < data.size(); at += 777) c.Update(absl::string_view(data).substr(at, 777));
  const Checksums pieces = c.Finish();
  const Checksums whole = ChecksumsOf(data);
  EXPECT_EQ(pieces.md5, whole.md5);
  EXPECT_EQ(pieces.crc32c, whole.crc32c);
  EXPECT_EQ(Crc32c(absl::string_view(data).substr(500), Crc32c(absl::string_view(data).substr(0, 500))),
            whole.crc32c);
}

TEST(ChecksumsTest, MalformedWireFormsAreRefused) {
  for (const char* bad : {"", "AAA", "!!!!", "AAAAAAAA", "4waSgw==x"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(Crc32cFromBase64(bad).has_value());
  }
  EXPECT_FALSE(Md5FromBase64("4waSgw==").has_value());
}

}  // namespace
}  // namespace mle::common
