// SseParser: reads a text/event-stream (server-sent events, as the HTML
// standard defines them) fed in arbitrary pieces, and hands each event's
// type ("" where it names none) and data (its "data:" lines joined with
// "\n") to a callback. Comments (":" lines, the server's heartbeats) and the
// "id:" and "retry:" fields are skipped. Not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mle::cli {

class SseParser {
 public:
  // Returns false to stop: Feed then returns false too.
  using OnEvent = std::function<bool(const std::string& type, const std::string& data)>;
  explicit SseParser(OnEvent on_event) : on_event_(std::move(on_event)) {}

  bool Feed(std::string_view bytes);

 private:
  bool Line(std::string_view line);

  OnEvent on_event_;
  std::string partial_;  // a line not yet ended
  bool after_cr_ = false;  // the last byte fed was '\r' (a "\r\n" may be split)
  std::string type_, data_;
  bool has_data_ = false;
};

}  // namespace mle::cli
