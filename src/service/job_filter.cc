#include "absl/strings/string_view.h"
#include "service/job_filter.h"

#include <cctype>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "common/time_format.h"

namespace mle::service {

struct JobFilter::Node {
  enum Kind { kAnd, kOr, kNot, kTerm } kind;
  std::vector<std::shared_ptr<const Node>> children;
  std::string key, op, value;
};

namespace {

using Node = JobFilter::Node;
using NodePtr = std::shared_ptr<const Node>;

struct Token {
  enum Kind { kWord, kOp, kLParen, kRParen, kEnd } kind;
  std::string text;
  bool quoted = false;
};

absl::Status FilterError(std::string description) {
  return common::InvalidArgumentWithViolations("Invalid filter.", {{"filter", std::move(description)}});
}

absl::StatusOr<std::vector<Token>> Lex(absl::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (c == '(') { out.push_back({Token::kLParen, "("}); ++i; continue; }
    if (c == ')') { out.push_back({Token::kRParen, ")"}); ++i; continue; }
    if (c == '=' || c == ':' ) { out.push_back({Token::kOp, std::string(1, c)}); ++i; continue; }
    if (c == '!' || c == '<' || c == '>') {
      if (i + 1 < s.size() && s[i + 1] == '=') {
        out.push_back({Token::kOp, std::string(s.substr(i, 2))});
        i += 2;
      } else if (c == '!') {
        return FilterError(absl::StrCat("unexpected '!' at position ", i, "; did you mean '!='?"));
      } else {
        out.push_back({Token::kOp, std::string(1, c)});
        ++i;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t end = s.find(c, i + 1);
      if (end == absl::string_view::npos) return FilterError(absl::StrCat("unterminated quote at position ", i));
      out.push_back({Token::kWord, std::string(s.substr(i + 1, end - i - 1)), true});
      i = end + 1;
      continue;
    }
    size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) &&
           absl::string_view("()=:!<>\"'").find(s[i]) == absl::string_view::npos) {
      ++i;
    }
    out.push_back({Token::kWord, std::string(s.substr(start, i - start))});
  }
  out.push_back({Token::kEnd, ""});
  return out;
}

bool KnownKey(absl::string_view key) {
  static constexpr absl::string_view kKeys[] = {
      "jobId", "state", "errorMessage", "createTime", "startTime", "endTime",
      "trainingInput.region", "trainingInput.scaleTier", "trainingInput.runtimeVersion",
      "trainingInput.pythonVersion", "trainingInput.pythonModule", "trainingInput.masterType",
      "trainingInput.workerType"};
  if (absl::StartsWith(key, "labels.") && key.size() > 7) return true;
  for (auto k : kKeys) if (k == key) return true;
  return false;
}

// Vertex's keys (customJobs.list) as the internal keys Field reads.
std::optional<std::string> VertexKey(const std::string& key) {
  if (key == "display_name") return std::string("vertex.displayName");
  if (key == "state") return std::string("vertex.state");
  if (key == "create_time") return std::string("createTime");
  if (key == "start_time") return std::string("startTime");
  if (key == "end_time") return std::string("endTime");
  if (absl::StartsWith(key, "labels.") && key.size() > 7) return key;
  return std::nullopt;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, bool vertex) : t_(std::move(tokens)), vertex_(vertex) {}

  absl::StatusOr<NodePtr> ParseAll() {
    auto n = ParseAnd();
    if (!n.ok()) return n;
    if (Peek().kind != Token::kEnd) return FilterError(absl::StrCat("unexpected \"", Peek().text, "\""));
    return n;
  }

 private:
  const Token& Peek() const { return t_[pos_]; }
  bool IsWord(absl::string_view w) const { return Peek().kind == Token::kWord && !Peek().quoted && Peek().text == w; }

  absl::StatusOr<NodePtr> ParseAnd() {
    auto first = ParseOr();
    if (!first.ok()) return first;
    auto node = std::make_shared<Node>(Node{Node::kAnd, {*first}, "", "", ""});
    for (;;) {
      if (IsWord("AND")) { ++pos_; }
      else if (Peek().kind == Token::kEnd || Peek().kind == Token::kRParen) break;
      auto next = ParseOr();
      if (!next.ok()) return next;
      node->children.push_back(*next);
    }
    if (node->children.size() == 1) return node->children[0];
    return NodePtr(node);
  }

  absl::StatusOr<NodePtr> ParseOr() {
    auto first = ParseUnary();
    if (!first.ok()) return first;
    auto node = std::make_shared<Node>(Node{Node::kOr, {*first}, "", "", ""});
    while (IsWord("OR")) {
      ++pos_;
      auto next = ParseUnary();
      if (!next.ok()) return next;
      node->children.push_back(*next);
    }
    if (node->children.size() == 1) return node->children[0];
    return NodePtr(node);
  }

  absl::StatusOr<NodePtr> ParseUnary() {
    if (IsWord("NOT")) {
      ++pos_;
      auto inner = ParseUnary();
      if (!inner.ok()) return inner;
      return NodePtr(std::make_shared<Node>(Node{Node::kNot, {*inner}, "", "", ""}));
    }
    if (Peek().kind == Token::kWord && !Peek().quoted && absl::StartsWith(Peek().text, "-") && Peek().text.size() > 1) {
      t_[pos_].text = t_[pos_].text.substr(1);
      auto inner = ParseUnary();
      if (!inner.ok()) return inner;
      return NodePtr(std::make_shared<Node>(Node{Node::kNot, {*inner}, "", "", ""}));
    }
    if (Peek().kind == Token::kLParen) {
      ++pos_;
      auto inner = ParseAnd();
      if (!inner.ok()) return inner;
      if (Peek().kind != Token::kRParen) return FilterError("missing ')'");
      ++pos_;
      return inner;
    }
    return ParseTerm();
  }

  absl::StatusOr<NodePtr> ParseTerm() {
    if (Peek().kind != Token::kWord) {
      return FilterError(Peek().kind == Token::kEnd ? "the filter ends where a term was expected"
                                                    : absl::StrCat("unexpected \"", Peek().text, "\""));
    }
    std::string key = Peek().text;
    ++pos_;
    if (Peek().kind != Token::kOp) {
      return FilterError(absl::StrCat("expected an operator (=, !=, :, <, >) after \"", key,
                                      "\", as in state=FAILED or jobId:census*"));
    }
    std::string op = Peek().text;
    ++pos_;
    if (Peek().kind != Token::kWord) return FilterError(absl::StrCat("missing a value after \"", key, op, "\""));
    std::string value = Peek().text;
    ++pos_;
    if (vertex_) {
      auto internal = VertexKey(key);
      if (!internal) {
        return FilterError(absl::StrCat("unknown key \"", key,
                                        "\"; filter on display_name, state, labels.KEY, create_time, start_time or "
                                        "end_time"));
      }
      key = *internal;
    } else if (!KnownKey(key)) {
      return FilterError(absl::StrCat("unknown key \"", key,
                                      "\"; filter on jobId, state, labels.KEY, createTime, startTime, endTime, "
                                      "errorMessage or trainingInput.{region,scaleTier,runtimeVersion,...}"));
    }
    return NodePtr(std::make_shared<Node>(Node{Node::kTerm, {}, key, op, value}));
  }

  std::vector<Token> t_;
  const bool vertex_;
  size_t pos_ = 0;
};

// Glob match with '*' wildcards, case-insensitive.
bool Glob(absl::string_view pattern, absl::string_view text) {
  size_t p = 0, t = 0, star = absl::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] != '*' &&
        absl::ascii_tolower(pattern[p]) == absl::ascii_tolower(text[t])) {
      ++p; ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::optional<std::string> Field(const model::Job& job, const std::string& key) {
  auto time = [](const std::optional<absl::Time>& t) -> std::optional<std::string> {
    if (!t) return std::nullopt;
    return common::FormatRfc3339(*t);
  };
  if (key == "jobId") return job.job_id;
  if (key == "state") return std::string(model::JobStateName(job.state));
  if (key == "errorMessage") return job.error_message;
  if (key == "createTime") return time(job.create_time);
  if (key == "startTime") return time(job.start_time);
  if (key == "endTime") return time(job.end_time);
  if (key == "vertex.displayName") return job.vertex ? std::optional<std::string>(job.vertex->display_name) : std::nullopt;
  if (key == "vertex.state") return model::VertexStateName(job.state);
  if (absl::StartsWith(key, "labels.")) {
    auto it = job.labels.find(key.substr(7));
    if (it == job.labels.end()) return std::nullopt;
    return it->second;
  }
  if (!job.training_input) return std::nullopt;
  const auto& t = *job.training_input;
  if (key == "trainingInput.region") return t.region;
  if (key == "trainingInput.scaleTier") return t.scale_tier.empty() ? std::string("BASIC") : t.scale_tier;
  if (key == "trainingInput.runtimeVersion") return t.runtime_version;
  if (key == "trainingInput.pythonVersion") return t.python_version;
  if (key == "trainingInput.pythonModule") return t.python_module;
  if (key == "trainingInput.masterType") return t.master_type;
  if (key == "trainingInput.workerType") return t.worker_type;
  return std::nullopt;
}

bool TermMatches(const Node& n, const model::Job& job) {
  auto value = Field(job, n.key);
  if (n.op == "!=") return !value || !Glob(n.value, *value);
  if (!value) return false;
  if (n.op == "=") return Glob(n.value, *value);
  if (n.op == ":") {
    if (n.value == "*") return !value->empty();
    // "has": the pattern matches the whole value or one of its words.
    if (Glob(n.value, *value)) return true;
    for (absl::string_view word : absl::StrSplit(*value, absl::ByAnyChar(" ._-/"), absl::SkipEmpty())) {
      if (Glob(n.value, word)) return true;
    }
    return false;
  }
  int cmp = value->compare(n.value);
  if (n.op == "<") return cmp < 0;
  if (n.op == "<=") return cmp <= 0;
  if (n.op == ">") return cmp > 0;
  if (n.op == ">=") return cmp >= 0;
  return false;
}

bool Eval(const Node& n, const model::Job& job) {
  switch (n.kind) {
    case Node::kAnd:
      for (const auto& c : n.children) if (!Eval(*c, job)) return false;
      return true;
    case Node::kOr:
      for (const auto& c : n.children) if (Eval(*c, job)) return true;
      return false;
    case Node::kNot:
      return !Eval(*n.children[0], job);
    case Node::kTerm:
      return TermMatches(n, job);
  }
  return false;
}

}  // namespace

absl::StatusOr<JobFilter> JobFilter::Parse(absl::string_view text) { return ParseDialect(text, false); }
absl::StatusOr<JobFilter> JobFilter::ParseVertex(absl::string_view text) { return ParseDialect(text, true); }

absl::StatusOr<JobFilter> JobFilter::ParseDialect(absl::string_view text, bool vertex) {
  JobFilter f;
  if (absl::StripAsciiWhitespace(text).empty()) return f;
  if (text.size() > 4096) return FilterError("the filter is longer than 4096 characters");
  auto tokens = Lex(text);
  if (!tokens.ok()) return tokens.status();
  if (tokens->size() > 512) return FilterError("the filter has more than 512 tokens");
  Parser p(*std::move(tokens), vertex);
  auto root = p.ParseAll();
  if (!root.ok()) return root.status();
  f.root_ = *root;
  return f;
}

bool JobFilter::Matches(const model::Job& job) const { return !root_ || Eval(*root_, job); }

}  // namespace mle::service
