// BucketStore on a real temporary directory: the name rules as a table,
// symlinks refused, put/get/list/delete round trips, listing order, prefixes
// and pages, metadata for files written behind the store's back, and what a
// crash leaves behind.
#include "buckets/bucket_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <atomic>
#include <thread>

#include "common/checksums.h"

namespace mle::buckets {
namespace {

namespace fs = std::filesystem;
// The MD5 the store knows of an object (base64; "" when unknown), and of bytes.
std::string Sum(const ObjectInfo& o) { return o.checksums ? common::Md5Base64(*o.checksums) : ""; }
std::string SumOf(absl::string_view data) { return common::Md5Base64(common::ChecksumsOf(data)); }
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// ---- names ----

struct NameCase {
  std::string name;
  bool ok;
};

TEST(BucketNames, Table) {
  const std::vector<NameCase> cases = {
      {"abc", true},
      {"my-bucket", true},
      {"my_bucket.v2", true},
      {"123", true},
      {"a-b_c.d", true},
      {std::string(63, 'a'), true},
      {"ab", false},
      {std::string(64, 'a'), false},
      {"", false},
      {"ABC", false},
      {"My-bucket", false},
      {"-abc", false},
      {"abc-", false},
      {"_abc", false},
      {"abc.", false},
      {".abc", false},
      {".tmp", false},
      {".meta", false},
      {"..", false},
      {"a b", false},
      {"a/b", false},
      {"a\\b", false},
      {"192.168.1.1", false},
      {"192.168.1", true},
      {std::string("ab\0c", 4), false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ValidateBucketName(c.name).ok(), c.ok) << "\"" << c.name << "\"";
    if (!c.ok) {
      EXPECT_EQ(ValidateBucketName(c.name).code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(ObjectNames, Table) {
  std::string seg255(255, 's');
  std::string seg204(204, 's');
  std::string max_name = seg204 + "/" + seg204 + "/" + seg204 + "/" + seg204 + "/" + seg204;
  ASSERT_EQ(max_name.size(), 1024u);
  const std::vector<NameCase> cases = {
      {"a", true},
      {"a/b", true},
      {"dir/sub/file.txt", true},
      {".hidden", true},
      {"dir/.hidden", true},
      {"a..b", true},
      {"...", true},
      {"a/.../b", true},
      {"trainer-0.0.0.tar.gz", true},
      {"with space/and:colon", true},
      {"caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac", true},
      {max_name, true},
      {seg255, true},
      // Traversal and absolute paths.
      {"..", false},
      {".", false},
      {"../x", false},
      {"a/../../b", false},
      {"a/..", false},
      {"a/./b", false},
      {"./a", false},
      {"/abs", false},
      {"/", false},
      // Empty segments: "a//b" would alias "a/b" on a file system; "a/" the directory "a".
      {"a//b", false},
      {"a/", false},
      {"", false},
      // Characters.
      {"a\\b", false},
      {"..\\x", false},
      {std::string("a\0b", 3), false},
      {"a\nb", false},
      {"a\rb", false},
      {"\xff\xfe", false},
      {"\xc0\xaf", false},        // overlong '/'
      {"\xed\xa0\x80", false},    // a UTF-16 surrogate
      // Lengths.
      {max_name + "y", false},
      {std::string(256, 's'), false},
  };
  for (const auto& c : cases) {
    absl::Status s = ValidateObjectName(c.name);
    EXPECT_EQ(s.ok(), c.ok) << "\"" << c.name << "\": " << s;
    if (!c.ok) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(GcsUris, Parse) {
  auto u = ParseGcsUri("gs://bucket/dir/file.txt");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->bucket, "bucket");
  EXPECT_EQ(u->path, "dir/file.txt");
  u = ParseGcsUri("gs://bucket/jobs/out/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->path, "jobs/out/");
  u = ParseGcsUri("gs://bucket");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->path, "");
  for (const char* bad : {"s3://bucket/x", "gs://", "gs://B/x", "gs://bucket/../x", "gs://bucket//x",
                          "gs://bucket/a/../../etc/passwd", "/local/path"}) {
    EXPECT_FALSE(ParseGcsUri(bad).ok()) << bad;
  }
}

// ---- the store ----

class BucketStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mle_buckets_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    root_ = dir_ / "buckets";
    Reopen();
    ASSERT_TRUE(store_->CreateBucket("bkt").ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  void Reopen() {
    store_.reset();
    auto s = BucketStore::Open(root_.string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
  }

  void PutOk(const std::string& name, const std::string& content = "x") {
    auto r = store_->Put("bkt", name, content);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
  }

  static void WriteFile(const fs::path& p, const std::string& content) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }

  std::vector<std::string> Names(const ListObjectsResult& r) {
    std::vector<std::string> out;
    for (const auto& i : r.items) out.push_back(i.name);
    return out;
  }

  // Every item and prefix over all pages of `page` size.
  std::pair<std::vector<std::string>, std::vector<std::string>> ListAll(ListObjectsRequest req, int page,
                                                                        int* pages = nullptr) {
    std::vector<std::string> items, prefixes;
    req.max_results = page;
    int n = 0;
    while (true) {
      auto r = store_->List("bkt", req);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      EXPECT_LE(static_cast<int>(r->items.size() + r->prefixes.size()), page);
      for (const auto& i : r->items) items.push_back(i.name);
      for (const auto& p : r->prefixes) prefixes.push_back(p);
      ++n;
      if (r->next_page_token.empty() || n > 1000) break;
      req.page_token = r->next_page_token;
    }
    if (pages) *pages = n;
    return {items, prefixes};
  }

  fs::path dir_, root_;
  std::unique_ptr<BucketStore> store_;
};

TEST_F(BucketStoreTest, PutGetStatDeleteRoundTrip) {
  auto put = store_->Put("bkt", "dir/sub/hello.txt", "abc");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->size, 3);
  EXPECT_EQ(Sum(*put), "kAFQmDzST7DWlj99KOF/cg==");  // MD5 of "abc"
  EXPECT_EQ(put->bucket, "bkt");
  EXPECT_EQ(put->name, "dir/sub/hello.txt");

  // It is a plain file where replicas look for it.
  auto local = store_->LocalPath("bkt", "dir/sub/hello.txt");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(*local, fs::canonical(root_).string() + "/bkt/dir/sub/hello.txt");
  std::ifstream in(*local);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "abc");
  // And nothing else lives in the bucket directory.
  std::set<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root_ / "bkt")) {
    if (e.is_regular_file()) files.insert(fs::relative(e.path(), root_ / "bkt").string());
  }
  EXPECT_EQ(files, std::set<std::string>{"dir/sub/hello.txt"});

  auto read = store_->Read("bkt", "dir/sub/hello.txt");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "abc");
  auto stat = store_->Stat("bkt", "dir/sub/hello.txt", false);
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(Sum(*stat), Sum(*put));
  EXPECT_EQ(stat->size, 3);
  EXPECT_LT(absl::AbsDuration(stat->updated - absl::Now()), absl::Minutes(1));

  // Replace.
  PutOk("dir/sub/hello.txt", "hello world");
  EXPECT_EQ(*store_->Read("bkt", "dir/sub/hello.txt"), "hello world");
  EXPECT_EQ(Sum(*store_->Stat("bkt", "dir/sub/hello.txt", false)), SumOf("hello world"));

  ASSERT_TRUE(store_->Delete("bkt", "dir/sub/hello.txt").ok());
  EXPECT_EQ(store_->Read("bkt", "dir/sub/hello.txt").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Stat("bkt", "dir/sub/hello.txt", true).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("bkt", "dir/sub/hello.txt").code(), absl::StatusCode::kNotFound);
  // Empty directories went with it.
  EXPECT_FALSE(fs::exists(root_ / "bkt" / "dir"));
  EXPECT_TRUE(fs::exists(root_ / "bkt"));
}

TEST_F(BucketStoreTest, EmptyObject) {
  auto put = store_->Put("bkt", "empty", "");
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->size, 0);
  EXPECT_EQ(Sum(*put), SumOf(""));
  EXPECT_EQ(*store_->Read("bkt", "empty"), "");
}

TEST_F(BucketStoreTest, Buckets) {
  EXPECT_EQ(store_->CreateBucket("bkt").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(store_->EnsureBucket("bkt").ok());
  EXPECT_TRUE(store_->EnsureBucket("other-bucket").ok());
  EXPECT_EQ(store_->CreateBucket("Bad").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GetBucket("missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Put("missing", "x", "y").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->List("missing", {}).status().code(), absl::StatusCode::kNotFound);
  // A directory made by a trainer is a bucket too; junk beside them is not.
  fs::create_directories(root_ / "made-by-hand");
  WriteFile(root_ / "stray-file", "x");
  fs::create_directories(root_ / "Not_A_Bucket");
  auto list = store_->ListBuckets();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const auto& b : *list) names.push_back(b.name);
  EXPECT_THAT(names, ElementsAre("bkt", "made-by-hand", "other-bucket"));
  auto b = store_->GetBucket("bkt");
  ASSERT_TRUE(b.ok());
  EXPECT_LT(absl::AbsDuration(b->created - absl::Now()), absl::Minutes(1));
}

TEST_F(BucketStoreTest, InvalidNamesAreRefusedEverywhere) {
  for (const char* name : {"../x", "a/../../b", "/abs", "a//b", "a/", "..", "a\\b"}) {
    EXPECT_EQ(store_->Put("bkt", name, "x").status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(store_->Read("bkt", name).status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(store_->Stat("bkt", name, true).status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(store_->Delete("bkt", name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(store_->Put("../bkt", "x", "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put(".tmp", "x", "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  EXPECT_FALSE(fs::exists(root_ / "x"));
}

TEST_F(BucketStoreTest, SymlinksAreNeverFollowed) {
  const fs::path outside = dir_ / "outside";
  WriteFile(outside / "secret.txt", "secret");
  fs::create_symlink(outside / "secret.txt", root_ / "bkt" / "link");
  fs::create_symlink(outside, root_ / "bkt" / "linkdir");
  fs::create_directories(root_ / "bkt" / "real");
  fs::create_symlink(outside / "secret.txt", root_ / "bkt" / "real" / "link");
  PutOk("real/ok", "fine");

  for (const char* name : {"link", "linkdir/secret.txt", "real/link"}) {
    EXPECT_EQ(store_->Read("bkt", name).status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_EQ(store_->Stat("bkt", name, true).status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_EQ(store_->OpenObject("bkt", name).status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_EQ(store_->Put("bkt", name, "overwrite").status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_EQ(store_->Delete("bkt", name).code(), absl::StatusCode::kFailedPrecondition) << name;
  }
  // Writing below a symlinked directory is refused too, and nothing landed outside.
  EXPECT_EQ(store_->Put("bkt", "linkdir/new.txt", "x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(outside / "new.txt"));
  std::ifstream in(outside / "secret.txt");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "secret");
  EXPECT_TRUE(fs::is_symlink(root_ / "bkt" / "link"));

  // Listings skip symlinks (files and directories).
  auto all = ListAll({}, 1000);
  EXPECT_THAT(all.first, ElementsAre("real/ok"));
  ListObjectsRequest by_dir;
  by_dir.delimiter = "/";
  auto grouped = ListAll(by_dir, 1000);
  EXPECT_THAT(grouped.first, IsEmpty());
  EXPECT_THAT(grouped.second, ElementsAre("real/"));

  // A bucket directory that is a symlink is refused.
  fs::create_symlink(outside, root_ / "evil");
  EXPECT_EQ(store_->GetBucket("evil").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Read("evil", "secret.txt").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Put("evil", "x", "x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->List("evil", {}).status().code(), absl::StatusCode::kFailedPrecondition);
  auto buckets = store_->ListBuckets();
  ASSERT_TRUE(buckets.ok());
  for (const auto& b : *buckets) EXPECT_NE(b.name, "evil");
}

TEST_F(BucketStoreTest, SpecialFilesAreNotObjects) {
  ASSERT_EQ(::mkfifo((root_ / "bkt" / "fifo").c_str(), 0600), 0);
  // Neither hangs nor serves it.
  EXPECT_EQ(store_->Read("bkt", "fifo").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Put("bkt", "fifo", "x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ListAll({}, 10).first, IsEmpty());
}

TEST_F(BucketStoreTest, AnObjectCannotAlsoBeAPrefix) {
  PutOk("a", "file");
  EXPECT_EQ(store_->Put("bkt", "a/b", "x").status().code(), absl::StatusCode::kFailedPrecondition);
  PutOk("d/e", "x");
  EXPECT_EQ(store_->Put("bkt", "d", "x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store_->Read("bkt", "a"), "file");
  EXPECT_EQ(store_->Read("bkt", "d").status().code(), absl::StatusCode::kNotFound);  // a prefix, not an object
  EXPECT_EQ(store_->Delete("bkt", "d").code(), absl::StatusCode::kNotFound);
}

TEST_F(BucketStoreTest, ListsInByteOrder) {
  // '-' (0x2d) < '/' (0x2f) < '0' (0x30): a depth-first walk must still interleave.
  for (const char* n : {"a0", "a/b", "a-c", "a/a/z", "b", "a/c", "A", "a"}) {
    if (std::string(n) == "a") continue;  // "a" cannot be both file and prefix
    PutOk(n);
  }
  auto all = ListAll({}, 1000);
  EXPECT_THAT(all.first, ElementsAre("A", "a-c", "a/a/z", "a/b", "a/c", "a0", "b"));
  EXPECT_THAT(all.second, IsEmpty());
  for (int page : {1, 2, 3}) {
    int pages = 0;
    auto paged = ListAll({}, page, &pages);
    EXPECT_EQ(paged.first, all.first) << "page size " << page;
    EXPECT_EQ(pages, (7 + page - 1) / page);
  }
}

TEST_F(BucketStoreTest, PrefixAndDelimiter) {
  for (const char* n : {"logs/run1/a.txt", "logs/run1/b.txt", "logs/run2/c.txt", "logs/readme", "logs/run3/deep/d",
                        "model/saved.pb", "top.txt", "logsx"}) {
    PutOk(n);
  }
  ListObjectsRequest req;
  req.delimiter = "/";
  auto r = ListAll(req, 1000);
  EXPECT_THAT(r.first, ElementsAre("logsx", "top.txt"));
  EXPECT_THAT(r.second, ElementsAre("logs/", "model/"));

  req.prefix = "logs/";
  r = ListAll(req, 1000);
  EXPECT_THAT(r.first, ElementsAre("logs/readme"));
  EXPECT_THAT(r.second, ElementsAre("logs/run1/", "logs/run2/", "logs/run3/"));

  req.prefix = "logs/r";  // a partial segment
  r = ListAll(req, 1000);
  EXPECT_THAT(r.first, ElementsAre("logs/readme"));
  EXPECT_THAT(r.second, ElementsAre("logs/run1/", "logs/run2/", "logs/run3/"));

  req.prefix = "logs";
  r = ListAll(req, 1000);
  EXPECT_THAT(r.first, ElementsAre("logsx"));
  EXPECT_THAT(r.second, ElementsAre("logs/"));

  req.prefix = "logs/run1/";
  r = ListAll(req, 1000);
  EXPECT_THAT(r.first, ElementsAre("logs/run1/a.txt", "logs/run1/b.txt"));
  EXPECT_THAT(r.second, IsEmpty());

  // No delimiter: everything under the prefix.
  ListObjectsRequest flat;
  flat.prefix = "logs/run";
  r = ListAll(flat, 1000);
  EXPECT_THAT(r.first, ElementsAre("logs/run1/a.txt", "logs/run1/b.txt", "logs/run2/c.txt", "logs/run3/deep/d"));

  // Paging across prefixes never repeats one.
  req.prefix = "logs/";
  for (int page : {1, 2, 3}) {
    auto paged = ListAll(req, page);
    EXPECT_THAT(paged.first, ElementsAre("logs/readme")) << page;
    EXPECT_THAT(paged.second, ElementsAre("logs/run1/", "logs/run2/", "logs/run3/")) << page;
  }

  // Another delimiter.
  ListObjectsRequest dot;
  dot.delimiter = ".";
  r = ListAll(dot, 1000);
  EXPECT_THAT(r.first, ElementsAre("logs/readme", "logs/run3/deep/d", "logsx"));
  EXPECT_THAT(r.second, ElementsAre("logs/run1/a.", "logs/run1/b.", "logs/run2/c.", "model/saved.", "top."));
  for (int page : {1, 2, 5}) {
    auto paged = ListAll(dot, page);
    EXPECT_EQ(paged.first, r.first) << page;
    EXPECT_EQ(paged.second, r.second) << page;
  }
}

TEST_F(BucketStoreTest, ManyObjectsOverPages) {
  std::vector<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    std::string name = "obj/" + std::to_string(i);
    PutOk(name);
    expected.push_back(name);
  }
  std::sort(expected.begin(), expected.end());
  int pages = 0;
  auto r = ListAll({}, 10, &pages);
  EXPECT_EQ(r.first, expected);
  EXPECT_EQ(pages, 3);

  ListObjectsRequest bad;
  bad.page_token = "not base64 !!";
  EXPECT_EQ(store_->List("bkt", bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(BucketStoreTest, EmptyDirectoriesAreNotPrefixes) {
  fs::create_directories(root_ / "bkt" / "empty" / "deeper");
  PutOk("full/x");
  ListObjectsRequest req;
  req.delimiter = "/";
  auto r = ListAll(req, 1000);
  EXPECT_THAT(r.second, ElementsAre("full/"));
  EXPECT_THAT(ListAll({}, 1000).first, ElementsAre("full/x"));
}

TEST_F(BucketStoreTest, FilesWrittenByTrainers) {
  // A replica writes $MLENGINE_GCS_ROOT/bkt/out/model.bin directly: no metadata.
  WriteFile(root_ / "bkt" / "out" / "model.bin", "weights");
  // And files the store must not serve under any name.
  WriteFile(root_ / "bkt" / "out" / "bad\\name", "x");
  WriteFile(root_ / "bkt" / "out" / "bad\nname", "x");
  auto r = ListAll({}, 1000);
  EXPECT_THAT(r.first, ElementsAre("out/model.bin"));
  auto listed = store_->List("bkt", {});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->items.size(), 1u);
  EXPECT_EQ(listed->items[0].size, 7);
  EXPECT_EQ(Sum(listed->items[0]), "");  // not computed for listings

  auto stat = store_->Stat("bkt", "out/model.bin", false);
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(Sum(*stat), "");
  stat = store_->Stat("bkt", "out/model.bin", true);
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(Sum(*stat), SumOf("weights"));
  // Remembered from now on.
  EXPECT_EQ(Sum(store_->List("bkt", {})->items[0]), SumOf("weights"));
  EXPECT_EQ(*store_->Read("bkt", "out/model.bin"), "weights");

  // A trainer overwriting an uploaded object: the old metadata is not believed.
  PutOk("ckpt", "version one");
  WriteFile(root_ / "bkt" / "ckpt", "version two!");
  EXPECT_EQ(Sum(*store_->Stat("bkt", "ckpt", false)), "");
  EXPECT_EQ(Sum(*store_->Stat("bkt", "ckpt", true)), SumOf("version two!"));
  EXPECT_EQ(store_->Stat("bkt", "ckpt", false)->size, 12);
}

TEST_F(BucketStoreTest, PutFileMovesTheFile) {
  const std::string src = store_->upload_dir() + "/upload-test";
  WriteFile(src, "streamed bytes");
  auto put = store_->PutFile("bkt", "up/loaded", src);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(Sum(*put), SumOf("streamed bytes"));
  EXPECT_EQ(put->size, 14);
  EXPECT_FALSE(fs::exists(src));
  EXPECT_EQ(*store_->Read("bkt", "up/loaded"), "streamed bytes");

  // With the hash given by the caller (the HTTP server hashes while receiving).
  WriteFile(src, "abc");
  put = store_->PutFile("bkt", "given", src, {}, common::ChecksumsOf("abc"));
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(Sum(*store_->Stat("bkt", "given", false)), SumOf("abc"));

  // From another directory (possibly another file system): copied, then removed.
  const fs::path elsewhere = dir_ / "elsewhere.bin";
  WriteFile(elsewhere, "from elsewhere");
  put = store_->PutFile("bkt", "copied", elsewhere.string());
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(*store_->Read("bkt", "copied"), "from elsewhere");
  EXPECT_FALSE(fs::exists(elsewhere));

  // Refused names leave the source alone.
  WriteFile(src, "keep me");
  EXPECT_EQ(store_->PutFile("bkt", "../escape", src).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::exists(src));
}

TEST_F(BucketStoreTest, CrashLeftoversAreNeverListedAndAreCleanedAtOpen) {
  PutOk("real", "data");
  // What a crash mid-upload leaves: a temporary file, and metadata for an
  // object whose rename never happened.
  WriteFile(root_ / ".tmp" / "upload-deadbeef", "partial");
  WriteFile(root_ / ".tmp" / "put-cafe", "partial");
  auto r = ListAll({}, 1000);
  EXPECT_THAT(r.first, ElementsAre("real"));
  auto buckets = store_->ListBuckets();
  ASSERT_TRUE(buckets.ok());
  for (const auto& b : *buckets) {
    EXPECT_NE(b.name, ".tmp");
    EXPECT_NE(b.name, ".meta");
  }
  Reopen();
  EXPECT_TRUE(fs::is_empty(root_ / ".tmp"));
  EXPECT_EQ(*store_->Read("bkt", "real"), "data");
  EXPECT_EQ(Sum(*store_->Stat("bkt", "real", false)), SumOf("data"));
  EXPECT_THAT(ListAll({}, 1000).first, ElementsAre("real"));
}

TEST_F(BucketStoreTest, ConcurrentPutsAndDeletesInSharedDirectories) {
  // Deletes prune empty directories while other threads create objects in
  // them: every put that was not deleted must survive.
  constexpr int kThreads = 8, kPerThread = 20;
  std::vector<std::thread> threads;
  std::vector<std::string> failures[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &failures] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string name = "shared/d" + std::to_string(i % 3) + "/t" + std::to_string(t) + "-" + std::to_string(i);
        if (auto r = store_->Put("bkt", name, name); !r.ok()) failures[t].push_back(r.status().ToString());
        if (i % 2 == 1) {
          if (auto s = store_->Delete("bkt", name); !s.ok()) failures[t].push_back(s.ToString());
        }
        if (auto r = store_->List("bkt", {}); !r.ok()) failures[t].push_back(r.status().ToString());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& f : failures) EXPECT_THAT(f, IsEmpty());
  std::vector<std::string> expected;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; i += 2) {
      expected.push_back("shared/d" + std::to_string(i % 3) + "/t" + std::to_string(t) + "-" + std::to_string(i));
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ListAll({}, 1000).first, expected);
  for (const auto& name : expected) EXPECT_EQ(*store_->Read("bkt", name), name);
}

TEST_F(BucketStoreTest, LocalPaths) {
  const std::string root = fs::canonical(root_).string();
  EXPECT_EQ(store_->root(), root);
  EXPECT_EQ(*store_->LocalPath("bkt", "a/b.txt"), root + "/bkt/a/b.txt");
  EXPECT_EQ(*store_->LocalPath("bkt", "jobs/1/"), root + "/bkt/jobs/1/");
  EXPECT_EQ(*store_->LocalPath("bkt", ""), root + "/bkt");
  EXPECT_FALSE(store_->LocalPath("bkt", "../x").ok());
  EXPECT_FALSE(store_->LocalPath("..", "x").ok());
}

// A backup's object (mlengined backup/restore): the bytes of another
// store's object with its generation, metageneration, creation time and
// attributes, in a bucket made for it; bytes that do not match the
// checksums the source described are refused, and nothing is written.
TEST_F(BucketStoreTest, ImportKeepsTheSourcesGenerationAndRefusesOtherBytes) {
  WriteOptions options;
  options.attrs.content_type = "text/plain";
  options.attrs.metadata["k"] = "v";
  ASSERT_TRUE(store_->Put("bkt", "a/b.txt", "first", options).ok());
  auto second = store_->Put("bkt", "a/b.txt", "second", options);
  ASSERT_TRUE(second.ok()) << second.status();
  auto opened = store_->OpenObject("bkt", "a/b.txt", /*compute_checksums=*/true);
  ASSERT_TRUE(opened.ok()) << opened.status();

  auto other = BucketStore::Open((dir_ / "copy").string());
  ASSERT_TRUE(other.ok()) << other.status();
  auto imported = (*other)->Import(opened->info, opened->fd.get());
  ASSERT_TRUE(imported.ok()) << imported.status();
  auto stat = (*other)->Stat("bkt", "a/b.txt", /*compute_checksums=*/false);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->generation, second->generation);
  EXPECT_EQ(stat->metageneration, second->metageneration);
  EXPECT_EQ(stat->created, second->created);
  EXPECT_EQ(stat->attrs.content_type, "text/plain");
  EXPECT_EQ(stat->attrs.metadata.at("k"), "v");
  EXPECT_EQ(Sum(*stat), SumOf("second"));
  auto read = (*other)->Read("bkt", "a/b.txt");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, "second");

  // The description of other bytes than those read: refused.
  ObjectInfo lying = opened->info;
  lying.name = "a/lie.txt";
  lying.checksums = common::ChecksumsOf("something else");
  ::lseek(opened->fd.get(), 0, SEEK_SET);
  auto refused = (*other)->Import(lying, opened->fd.get());
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::IsNotFound((*other)->Stat("bkt", "a/lie.txt", false).status()));
}

}  // namespace
}  // namespace mle::buckets

namespace mle::buckets {
namespace {

// ---- generations, preconditions, compose, copies, sessions ----

TEST(PreconditionsTable, Rules) {
  ObjectInfo live;
  live.generation = 100;
  live.metageneration = 3;
  struct Row {
    Preconditions p;
    bool exists;
    bool ok;
  };
  auto gm = [](int64_t g) { Preconditions p; p.generation_match = g; return p; };
  auto gnm = [](int64_t g) { Preconditions p; p.generation_not_match = g; return p; };
  auto mm = [](int64_t g) { Preconditions p; p.metageneration_match = g; return p; };
  auto mnm = [](int64_t g) { Preconditions p; p.metageneration_not_match = g; return p; };
  const Row rows[] = {
      {{}, false, true},       {{}, true, true},         {gm(0), false, true},   {gm(0), true, false},
      {gm(100), true, true},   {gm(99), true, false},    {gm(100), false, false}, {gnm(100), true, false},
      {gnm(99), true, true},   {gnm(100), false, true},  {mm(3), true, true},    {mm(2), true, false},
      {mm(3), false, false},   {mnm(3), true, false},    {mnm(2), true, true},
  };
  for (size_t i = 0; i < std::size(rows); ++i) {
    SCOPED_TRACE(i);
    absl::Status s = CheckPreconditions(rows[i].p, rows[i].exists ? &live : nullptr, "gs://b/o");
    EXPECT_EQ(s.ok(), rows[i].ok) << s;
    if (!s.ok()) {
      auto reason = ReasonOf(s);
      ASSERT_TRUE(reason.has_value());
      EXPECT_EQ(reason->http_status, 412);
      EXPECT_EQ(reason->reason, "conditionNotMet");
    }
  }
}

TEST(ObjectMetaFormat, RoundTripsAndRefusesGarbage) {
  ObjectMeta m;
  m.size = 5;
  m.mtime_ns = 123456789012345;
  m.ino = 77;
  m.generation = 1700000000000001;
  m.metageneration = 4;
  m.created_us = 1700000000000000;
  m.attrs.content_type = "text/plain; charset=utf-8";
  m.attrs.metadata = {{"tab\tkey", "line\nvalue"}, {"k", ""}};
  m.checksums = common::ChecksumsOf("hello");
  auto back = DecodeObjectMeta(EncodeObjectMeta(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->generation, m.generation);
  EXPECT_EQ(back->metageneration, 4);
  EXPECT_EQ(back->attrs.metadata, m.attrs.metadata);
  EXPECT_EQ(back->attrs.content_type, m.attrs.content_type);
  EXPECT_EQ(back->checksums->md5, m.checksums->md5);
  for (const char* bad : {"", "mle-object-meta-v1 1 2 3 x", "mle-object-meta-v2\nsize\tx\n", "mle-object-meta-v2\n"}) {
    EXPECT_FALSE(DecodeObjectMeta(bad).has_value()) << bad;
  }
}

TEST(ObjectAttrsRules, CustomMetadataLimit) {
  ObjectAttrs attrs;
  attrs.metadata["k"] = std::string(kMaxCustomMetadataBytes - 1, 'v');
  EXPECT_TRUE(ValidateAttrs(attrs).ok());
  attrs.metadata["k2"] = "x";
  EXPECT_EQ(ValidateAttrs(attrs).code(), absl::StatusCode::kInvalidArgument);
}

class StoreOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("store-ops-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto s = BucketStore::Open((dir_ / "root").string());
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
    ASSERT_TRUE(store_->CreateBucket("bkt").ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::unique_ptr<BucketStore> store_;
};

TEST_F(StoreOpsTest, GenerationsGrowAndPreconditionsGuardWrites) {
  auto v1 = store_->Put("bkt", "o", "one");
  ASSERT_TRUE(v1.ok());
  WriteOptions must_not_exist;
  must_not_exist.preconditions.generation_match = 0;
  EXPECT_EQ(store_->Put("bkt", "o", "two", must_not_exist).status().code(), absl::StatusCode::kFailedPrecondition);
  WriteOptions at_v1;
  at_v1.preconditions.generation_match = v1->generation;
  auto v2 = store_->Put("bkt", "o", "two", at_v1);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_GT(v2->generation, v1->generation);
  EXPECT_EQ(store_->Put("bkt", "o", "three", at_v1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store_->Read("bkt", "o"), "two");
  // Metadata changes bump the metageneration, not the generation.
  auto patched = store_->UpdateAttrs("bkt", "o", {}, [](ObjectAttrs& a) {
    a.metadata["k"] = "v";
    return absl::OkStatus();
  });
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ(patched->generation, v2->generation);
  EXPECT_EQ(patched->metageneration, 2);
  EXPECT_EQ(store_->Stat("bkt", "o", false)->attrs.metadata.at("k"), "v");
  // ... and set `updated`, keeping what the metadata knows (checksums included).
  EXPECT_GE(patched->updated, v2->updated);
  auto after = store_->Stat("bkt", "o", false);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->updated, patched->updated);
  EXPECT_EQ(after->metageneration, 2);
  ASSERT_TRUE(after->checksums.has_value());
  EXPECT_EQ(after->checksums->md5, common::ChecksumsOf("two").md5);
  Preconditions stale;
  stale.metageneration_match = 1;
  EXPECT_EQ(store_->Delete("bkt", "o", stale).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->Delete("bkt", "o").ok());
}

TEST_F(StoreOpsTest, ConcurrentCreatesWithIfGenerationMatchZeroHaveOneWinner) {
  for (int round = 0; round < 20; ++round) {
    const std::string name = "race/" + std::to_string(round);
    std::atomic<int> won{0}, refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        WriteOptions o;
        o.preconditions.generation_match = 0;
        auto r = store_->Put("bkt", name, "writer " + std::to_string(t), o);
        if (r.ok()) ++won;
        if (r.status().code() == absl::StatusCode::kFailedPrecondition) ++refused;
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(won.load(), 1) << name;
    EXPECT_EQ(refused.load(), 7) << name;
  }
}

TEST_F(StoreOpsTest, ComposeCopyAndChecksumsOfDirectWrites) {
  ASSERT_TRUE(store_->Put("bkt", "a", "hello ").ok());
  ASSERT_TRUE(store_->Put("bkt", "b", "world").ok());
  auto joined = store_->Compose("bkt", "ab", {{"a", std::nullopt}, {"b", std::nullopt}, {"a", std::nullopt}}, {});
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(*store_->Read("bkt", "ab"), "hello worldhello ");
  EXPECT_EQ(joined->checksums->crc32c, common::Crc32c("hello worldhello "));
  EXPECT_EQ(store_->Compose("bkt", "x", {{"a", 12345}}, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Compose("bkt", "x", std::vector<ComposeSource>(33, {"a", std::nullopt}), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto copy = store_->Copy("bkt", "ab", {}, "bkt", "copy/ab", nullptr, {});
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->checksums->md5, joined->checksums->md5);

  // A trainer's file: generation from its mtime, checksums computed once.
  const fs::path direct = dir_ / "root" / "bkt" / "direct.bin";
  { std::ofstream(direct) << "trainer bytes"; }
  auto before = store_->Stat("bkt", "direct.bin", false);
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(before->checksums.has_value());
  auto computed = store_->Stat("bkt", "direct.bin", true);
  EXPECT_EQ(computed->checksums->md5, common::ChecksumsOf("trainer bytes").md5);
  EXPECT_EQ(computed->generation, before->generation);
  // Rewritten by the trainer: the remembered sums are no longer believed.
  { std::ofstream(direct) << "other bytes, longer"; }
  EXPECT_FALSE(store_->Stat("bkt", "direct.bin", false)->checksums.has_value());
  EXPECT_EQ(store_->Stat("bkt", "direct.bin", true)->checksums->md5, common::ChecksumsOf("other bytes, longer").md5);
}

TEST_F(StoreOpsTest, ChecksumMismatchInstallsNothing) {
  WriteOptions o;
  o.expected_md5 = common::ChecksumsOf("something else").md5;
  EXPECT_EQ(store_->Put("bkt", "bad", "bytes", o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Stat("bkt", "bad", false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(fs::is_empty(dir_ / "root" / ".tmp"));
}

TEST_F(StoreOpsTest, ResumableSessionsSurviveReopenAndLeaveNoPartialObject) {
  SessionRecord record;
  record.bucket = "bkt";
  record.name = "big";
  record.owner = "user:a@example.com";
  auto session = store_->CreateUpload(record);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->id.size(), 64u);
  const std::string piece = (dir_ / "root" / ".tmp" / "piece").string();
  { std::ofstream(piece) << "0123456789"; }
  EXPECT_EQ(*store_->AppendUpload(session->id, 0, piece), 10);
  // Resent overlap is skipped; a gap is refused.
  { std::ofstream(piece) << "89abc"; }
  EXPECT_EQ(*store_->AppendUpload(session->id, 8, piece), 13);
  EXPECT_EQ(store_->AppendUpload(session->id, 20, piece).status().code(), absl::StatusCode::kInvalidArgument);
  // A crash now (Reopen): no object is visible, the session goes on.
  store_.reset();
  auto reopened = BucketStore::Open((dir_ / "root").string());
  ASSERT_TRUE(reopened.ok());
  store_ = *std::move(reopened);
  EXPECT_EQ(store_->Stat("bkt", "big", false).status().code(), absl::StatusCode::kNotFound);
  auto again = store_->GetUpload(session->id);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->received, 13);
  EXPECT_EQ(again->record.owner, "user:a@example.com");
  auto done = store_->FinishUpload(session->id);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(*store_->Read("bkt", "big"), "0123456789abc");
  EXPECT_EQ(store_->GetUpload(session->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetUpload("../../etc/passwd").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreOpsTest, DeleteBucketOnlyWhenEmpty) {
  ASSERT_TRUE(store_->Put("bkt", "x/y", "1").ok());
  auto refused = store_->DeleteBucket("bkt");
  EXPECT_EQ(ReasonOf(refused)->http_status, 409);
  ASSERT_TRUE(store_->Delete("bkt", "x/y").ok());
  EXPECT_TRUE(store_->DeleteBucket("bkt").ok());
  EXPECT_EQ(store_->GetBucket("bkt").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mle::buckets
