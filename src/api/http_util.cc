#include "api/http_util.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codec/job_codec.h"
#include "codec/json_text.h"
#include "common/status.h"

namespace mle::api {
namespace {

constexpr int kMaxJsonDepth = 64;

// Refuses nesting deeper than kMaxJsonDepth before the parser sees it.
bool TooDeep(absl::string_view body) {
  int depth = 0;
  bool in_string = false, escape = false;
  for (char c : body) {
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonBody(const std::string& body, bool allow_empty) {
  if (absl::StripAsciiWhitespace(body).empty()) {
    if (allow_empty) return nlohmann::json::object();
    return common::InvalidArgumentWithViolations("Invalid JSON payload received.",
                                                 {{"(body)", "the request needs a JSON body"}});
  }
  if (TooDeep(body)) {
    return common::InvalidArgumentWithViolations(
        "Invalid JSON payload received.", {{"(body)", absl::StrCat("JSON is nested deeper than ", kMaxJsonDepth, " levels")}});
  }
  try {
    return codec::ParseJson(body);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    return common::InvalidArgumentWithViolations("Invalid JSON payload received.", {{"(body)", e.what()}});
  }
}

std::optional<std::string> PercentDecode(absl::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !absl::ascii_isxdigit(s[i + 1]) || !absl::ascii_isxdigit(s[i + 2])) {
        return std::nullopt;
      }
      int v = 0;
      if (!absl::SimpleHexAtoi(s.substr(i + 1, 2), &v)) return std::nullopt;
      out.push_back(static_cast<char>(v));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

absl::Status BadParam(const std::string& name, const std::string& description) {
  return common::InvalidArgumentWithViolations("Invalid query parameter.", {{name, description}});
}

absl::StatusOr<Target> ParseTarget(absl::string_view target) {
  Target out;
  absl::string_view path = target, query;
  if (auto q = target.find('?'); q != absl::string_view::npos) {
    path = target.substr(0, q);
    query = target.substr(q + 1);
  }
  out.raw_path = std::string(path);
  for (absl::string_view part : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    auto k = PercentDecode(kv.first, true);
    auto v = PercentDecode(kv.second, true);
    if (!k || !v) return BadParam(std::string(kv.first), "is not correctly percent-encoded");
    out.query.emplace(*k, *v);
  }
  return out;
}

std::string QueryParam(const QueryParams& query, const std::string& name) {
  auto it = query.find(name);
  return it == query.end() ? "" : it->second;
}

namespace {

std::string JsonText(const std::function<std::string(int indent)>& write, bool pretty) {
  std::string text = write(pretty ? 2 : -1);
  if (pretty) text.push_back('\n');
  return text;
}

std::string JsonText(const nlohmann::json& value, bool pretty) {
  return JsonText([&](int indent) { return codec::DumpJson(value, indent); }, pretty);
}

}  // namespace

HttpResponse RenderJson(const nlohmann::json& value, bool pretty, int status) {
  HttpResponse r;
  r.status = status;
  r.body = JsonText(value, pretty);
  return r;
}

HttpResponse RenderJsonDeferred(std::function<nlohmann::json()> encode, bool pretty) {
  HttpResponse r;
  r.deferred_body = [encode = std::move(encode), pretty] { return JsonText(encode(), pretty); };
  return r;
}

HttpResponse RenderJsonText(const std::function<std::string(int indent)>& write, bool pretty) {
  HttpResponse r;
  r.status = 200;
  r.body = JsonText(write, pretty);
  return r;
}

HttpResponse RenderJsonTextDeferred(std::function<std::string(int indent)> write, bool pretty) {
  HttpResponse r;
  r.deferred_body = [write = std::move(write), pretty] { return JsonText(write, pretty); };
  return r;
}

HttpResponse RenderError(const absl::Status& status, bool pretty) {
  return RenderJson(codec::EncodeError(status), pretty, common::HttpStatusForCode(status.code()));
}

}  // namespace mle::api
