#include "cli/sse.h"

namespace mle::cli {

bool SseParser::Feed(std::string_view bytes) {
  for (char c : bytes) {
    if (after_cr_ && c == '\n') {  // the second half of "\r\n"
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      const std::string line = std::move(partial_);
      partial_.clear();
      if (!Line(line)) return false;
    } else {
      partial_.push_back(c);
    }
  }
  return true;
}

bool SseParser::Line(std::string_view line) {
  if (line.empty()) {  // the end of an event
    const bool dispatch = has_data_;
    std::string type = std::move(type_), data = std::move(data_);
    type_.clear();
    data_.clear();
    has_data_ = false;
    return !dispatch || on_event_(type, data);
  }
  if (line.front() == ':') return true;  // a comment
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    type_ = std::string(value);
  }
  return true;
}

}  // namespace mle::cli
