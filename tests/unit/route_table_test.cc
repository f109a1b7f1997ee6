// api/route_table: how request paths split and which pattern fits them, as
// rows of (syntax, path, pattern) -> match and variables.

#include "api/route_table.h"

#include <gtest/gtest.h>

namespace mle::api {
namespace {

constexpr PathSyntax kMl{.custom_verbs = true, .ignore_empty_segments = true};
constexpr PathSyntax kStorage{.custom_verbs = false, .ignore_empty_segments = false};

TEST(SplitRequestPathTest, SplitsDecodesAndTakesTheVerbBeforeDecoding) {
  auto p = SplitRequestPath("/v1/projects/my%2Dp/jobs/a%3Ab:cancel", kMl);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->segments, (std::vector<std::string>{"v1", "projects", "my-p", "jobs", "a:b"}));
  EXPECT_EQ(p->verb, "cancel");

  p = SplitRequestPath("//v1//projects/p/", kMl);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->segments, (std::vector<std::string>{"v1", "projects", "p"}));

  p = SplitRequestPath("/storage/v1/b/x/o/a:b//c/", kStorage);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->segments, (std::vector<std::string>{"storage", "v1", "b", "x", "o", "a:b", "", "c", ""}));
  EXPECT_EQ(p->verb, "");

  EXPECT_FALSE(SplitRequestPath("/v1/projects/%zz", kMl).ok());
  EXPECT_FALSE(SplitRequestPath("/storage/v1/b/x/o/%2", kStorage).ok());
}

TEST(PathPatternTest, Rows) {
  struct Row {
    PathSyntax syntax;
    const char* pattern;
    const char* path;
    bool match;
    PathVars vars;
  };
  const Row rows[] = {
      {kMl, "v1/projects/{project}/jobs", "/v1/projects/p/jobs", true, {{"project", "p"}}},
      {kMl, "v1/projects/{project}/jobs", "/v1/projects/p/jobs/", true, {{"project", "p"}}},
      {kMl, "v1/projects/{project}/jobs", "/v1/projects/p/jobs:list", false, {}},
      {kMl, "v1/projects/{project}/jobs", "/v1/projects/p", false, {}},
      {kMl, "v1/projects/{project}/jobs", "/v1/projects/p/jobs/j", false, {}},
      {kMl, "v1/projects/{project}/jobs", "/v1/projects/p/tasks", false, {}},
      {kMl, "v1/projects/{project}:getConfig", "/v1/projects/p:getConfig", true, {{"project", "p"}}},
      {kMl, "v1/projects/{project}:getConfig", "/v1/projects/p", false, {}},
      {kMl, "v1/projects/{project}:getConfig", "/v1/projects/p:setConfig", false, {}},
      {kMl, "v1/projects/{project}/jobs/{job}:cancel", "/v1/projects/p/jobs/a%3Ab:cancel", true,
       {{"project", "p"}, {"job", "a:b"}}},
      {kStorage, "storage/v1/b", "/storage/v1/b", true, {}},
      {kStorage, "storage/v1/b", "/storage/v1/b/", true, {}},
      {kStorage, "storage/v1/b", "/storage/v1/bx", false, {}},
      {kStorage, "storage/v1/b", "//storage/v1/b", false, {}},
      {kStorage, "storage/v1/b/{bucket}", "/storage/v1/b//", true, {{"bucket", ""}}},
      {kStorage, "storage/v1/b/{bucket}/o", "/storage/v1/b/x/o/", true, {{"bucket", "x"}}},
      {kStorage, "storage/v1/b/{bucket}/o/{object=**}", "/storage/v1/b/x/o/", false, {}},
      {kStorage, "storage/v1/b/{bucket}/o/{object=**}", "/storage/v1/b/x/o/a%2Fb/c", true,
       {{"bucket", "x"}, {"object", "a/b/c"}}},
      {kStorage, "storage/v1/b/{bucket}/o/{object=**}", "/storage/v1/b/x/o//", true,
       {{"bucket", "x"}, {"object", "/"}}},
      {kStorage, "storage/v1/b/{bucket}/o/{object=**}", "/storage/v1/b/x/o/d/", true,
       {{"bucket", "x"}, {"object", "d/"}}},
      {kStorage, "storage/v1/b/{bucket}/o/{object=**}", "/storage/v1/b/x/o/a:b", true,
       {{"bucket", "x"}, {"object", "a:b"}}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(std::string(row.pattern) + " <- " + row.path);
    auto path = SplitRequestPath(row.path, row.syntax);
    ASSERT_TRUE(path.ok());
    PathVars vars;
    EXPECT_EQ(PathPattern(row.pattern, row.syntax).Match(*path, &vars), row.match);
    // A pattern that does not fit writes nothing (a router tries the next).
    EXPECT_EQ(vars, row.vars);
  }
}

TEST(RouteTableTest, FirstRouteWhosePatternAndMethodFit) {
  using Handler = int;
  const RouteTable<Handler> table(kMl, {
                                           {"GET", "v1/projects/{project}/jobs", "list", 1},
                                           {"POST", "v1/projects/{project}/jobs", "create", 2},
                                           {"*", "v1/projects/{project}/jobs/{job}:getIamPolicy", "iam", 3},
                                       });
  auto find = [&](const char* method, const char* path) {
    auto p = SplitRequestPath(path, kMl);
    auto found = table.Find(method, *p);
    return found.route == nullptr ? std::string("none") : found.route->name;
  };
  EXPECT_EQ(find("GET", "/v1/projects/p/jobs"), "list");
  EXPECT_EQ(find("POST", "/v1/projects/p/jobs"), "create");
  EXPECT_EQ(find("DELETE", "/v1/projects/p/jobs"), "none");
  EXPECT_EQ(find("PUT", "/v1/projects/p/jobs/j:getIamPolicy"), "iam");
  EXPECT_EQ(find("GET", "/v1/projects/p/jobs/j"), "none");
}

TEST(PathPatternDeathTest, MalformedPatternsAbortAtStart) {
  EXPECT_DEATH(PathPattern("a//b", kMl), "malformed");
  EXPECT_DEATH(PathPattern("a/{rest=**}/b", kStorage), "last segment");
  EXPECT_DEATH(PathPattern("a/{x", kStorage), "variable");
  EXPECT_DEATH(PathPattern("a/b:", kMl), "verb");
}

}  // namespace
}  // namespace mle::api
