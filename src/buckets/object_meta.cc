#include "buckets/object_meta.h"

#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mle::buckets {
namespace {

constexpr absl::string_view kObjectMagic = "mle-object-meta-v2";
constexpr absl::string_view kSessionMagic = "mle-upload-session-v1";
constexpr absl::string_view kReasonUrl = "type.mlengine.dev/storage.ErrorReason";
constexpr size_t kMaxContentTypeBytes = 1024;

// Lines of C-escaped, tab-separated fields.
class RecordWriter {
 public:
  explicit RecordWriter(absl::string_view magic) { absl::StrAppend(&out_, magic, "\n"); }
  template <typename... Fields>
  void Add(const Fields&... fields) {
    std::vector<std::string> parts = {absl::CEscape(absl::StrCat(fields))...};
    absl::StrAppend(&out_, absl::StrJoin(parts, "\t"), "\n");
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Each record's unescaped fields; nullopt when the magic differs or a field
// does not unescape.
std::optional<std::vector<std::vector<std::string>>> ReadRecords(absl::string_view text, absl::string_view magic) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != magic) return std::nullopt;
  std::vector<std::vector<std::string>> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields;
    for (absl::string_view f : absl::StrSplit(lines[i], '\t')) {
      std::string value;
      if (!absl::CUnescape(f, &value)) return std::nullopt;
      fields.push_back(std::move(value));
    }
    out.push_back(std::move(fields));
  }
  return out;
}

bool Int(const std::vector<std::string>& r, int64_t* v) { return r.size() == 2 && absl::SimpleAtoi(r[1], v); }

void AddOptions(RecordWriter& w, const WriteOptions& o) {
  if (!o.attrs.content_type.empty()) w.Add("content_type", o.attrs.content_type);
  for (const auto& [k, v] : o.attrs.metadata) w.Add("meta", k, v);
  const Preconditions& p = o.preconditions;
  if (p.generation_match) w.Add("if_generation_match", *p.generation_match);
  if (p.generation_not_match) w.Add("if_generation_not_match", *p.generation_not_match);
  if (p.metageneration_match) w.Add("if_metageneration_match", *p.metageneration_match);
  if (p.metageneration_not_match) w.Add("if_metageneration_not_match", *p.metageneration_not_match);
  if (o.expected_md5) w.Add("expected_md5", absl::BytesToHexString(*o.expected_md5));
  if (o.expected_crc32c) w.Add("expected_crc32c", *o.expected_crc32c);
}

// Reads a record that AddOptions writes; false when it is not one or is malformed.
bool ReadOption(const std::vector<std::string>& r, WriteOptions& o, bool* ok) {
  const std::string& key = r[0];
  int64_t v = 0;
  auto precondition = [&](std::optional<int64_t>& field) {
    *ok = *ok && Int(r, &v);
    field = v;
    return true;
  };
  if (key == "content_type" && r.size() == 2) {
    o.attrs.content_type = r[1];
    return true;
  }
  if (key == "meta" && r.size() == 3) {
    o.attrs.metadata[r[1]] = r[2];
    return true;
  }
  if (key == "if_generation_match") return precondition(o.preconditions.generation_match);
  if (key == "if_generation_not_match") return precondition(o.preconditions.generation_not_match);
  if (key == "if_metageneration_match") return precondition(o.preconditions.metageneration_match);
  if (key == "if_metageneration_not_match") return precondition(o.preconditions.metageneration_not_match);
  if (key == "expected_md5" && r.size() == 2) {
    o.expected_md5 = absl::HexStringToBytes(r[1]);
    *ok = *ok && o.expected_md5->size() == 16;
    return true;
  }
  if (key == "expected_crc32c") {
    *ok = *ok && Int(r, &v) && v >= 0 && v <= 0xFFFFFFFFll;
    o.expected_crc32c = static_cast<uint32_t>(v);
    return true;
  }
  return false;
}

}  // namespace

absl::Status ValidateAttrs(const ObjectAttrs& attrs) {
  size_t total = 0;
  for (const auto& [k, v] : attrs.metadata) {
    if (k.empty()) return absl::InvalidArgumentError("Custom metadata keys cannot be empty.");
    total += k.size() + v.size();
  }
  if (total > kMaxCustomMetadataBytes) {
    return absl::InvalidArgumentError(absl::StrCat("The object's custom metadata is ", total,
                                                   " bytes (keys and values together); Cloud Storage allows at most ",
                                                   kMaxCustomMetadataBytes, "."));
  }
  if (attrs.content_type.size() > kMaxContentTypeBytes) {
    return absl::InvalidArgumentError(absl::StrCat("The content type is longer than ", kMaxContentTypeBytes,
                                                   " bytes."));
  }
  for (char c : attrs.content_type) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("The content type cannot contain control characters.");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPreconditions(const Preconditions& p, const ObjectInfo* current, absl::string_view what) {
  auto fail = [&](absl::string_view message) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "At least one of the pre-conditions you specified did not hold: ", message, " (", what, ")")),
                      "conditionNotMet", 412);
  };
  const int64_t gen = current ? current->generation : 0;
  if (p.generation_match && *p.generation_match != gen) {
    if (*p.generation_match == 0) return fail("ifGenerationMatch=0 requires that the object does not exist, and it does");
    return fail(current ? absl::StrCat("ifGenerationMatch=", *p.generation_match, " but the generation is ", gen)
                        : absl::StrCat("ifGenerationMatch=", *p.generation_match, " but there is no such object"));
  }
  if (p.generation_not_match && current && *p.generation_not_match == gen) {
    return fail(absl::StrCat("ifGenerationNotMatch=", gen, " but that is the object's generation"));
  }
  if (p.metageneration_match && (!current || *p.metageneration_match != current->metageneration)) {
    return fail(current ? absl::StrCat("ifMetagenerationMatch=", *p.metageneration_match,
                                       " but the metageneration is ", current->metageneration)
                        : absl::StrCat("ifMetagenerationMatch=", *p.metageneration_match,
                                       " but there is no such object"));
  }
  if (p.metageneration_not_match && current && *p.metageneration_not_match == current->metageneration) {
    return fail(absl::StrCat("ifMetagenerationNotMatch=", current->metageneration,
                             " but that is the object's metageneration"));
  }
  return absl::OkStatus();
}

absl::Status VerifyChecksums(const WriteOptions& options, const common::Checksums& actual) {
  if (options.expected_md5 && *options.expected_md5 != actual.md5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Provided MD5 hash \"", absl::Base64Escape(*options.expected_md5),
        "\" doesn't match calculated MD5 hash \"", common::Md5Base64(actual), "\": the object was not written."));
  }
  if (options.expected_crc32c && *options.expected_crc32c != actual.crc32c) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Provided CRC32C \"", common::Crc32cBase64(*options.expected_crc32c), "\" doesn't match calculated CRC32C \"",
        common::Crc32cBase64(actual.crc32c), "\": the object was not written."));
  }
  return absl::OkStatus();
}

absl::Status WithReason(absl::Status status, absl::string_view reason, int http_status) {
  status.SetPayload(kReasonUrl, absl::Cord(absl::StrCat(http_status, " ", reason)));
  return status;
}

std::optional<ErrorReason> ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kReasonUrl);
  if (!payload) return std::nullopt;
  std::pair<std::string, std::string> parts = absl::StrSplit(std::string(*payload), absl::MaxSplits(' ', 1));
  ErrorReason out;
  if (!absl::SimpleAtoi(parts.first, &out.http_status)) return std::nullopt;
  out.reason = parts.second;
  return out;
}

std::string EncodeObjectMeta(const ObjectMeta& m) {
  RecordWriter w(kObjectMagic);
  w.Add("size", m.size);
  w.Add("mtime", m.mtime_ns);
  w.Add("ino", m.ino);
  w.Add("generation", m.generation);
  w.Add("metageneration", m.metageneration);
  w.Add("created", m.created_us);
  if (m.checksums) {
    w.Add("md5", absl::BytesToHexString(m.checksums->md5));
    w.Add("crc32c", m.checksums->crc32c);
  }
  if (!m.attrs.content_type.empty()) w.Add("content_type", m.attrs.content_type);
  for (const auto& [k, v] : m.attrs.metadata) w.Add("meta", k, v);
  return w.Take();
}

std::optional<ObjectMeta> DecodeObjectMeta(absl::string_view text) {
  auto records = ReadRecords(text, kObjectMagic);
  if (!records) return std::nullopt;
  ObjectMeta m;
  bool ok = true, have_size = false, have_mtime = false, have_ino = false;
  std::optional<std::string> md5;
  std::optional<uint32_t> crc;
  for (const auto& r : *records) {
    const std::string& key = r[0];
    int64_t v = 0;
    if (key == "size") {
      ok = ok && Int(r, &m.size);
      have_size = true;
    } else if (key == "mtime") {
      ok = ok && Int(r, &m.mtime_ns);
      have_mtime = true;
    } else if (key == "ino") {
      ok = ok && Int(r, &v);
      m.ino = static_cast<uint64_t>(v);
      have_ino = true;
    } else if (key == "generation") {
      ok = ok && Int(r, &m.generation);
    } else if (key == "metageneration") {
      ok = ok && Int(r, &m.metageneration);
    } else if (key == "created") {
      ok = ok && Int(r, &m.created_us);
    } else if (key == "md5" && r.size() == 2) {
      md5 = absl::HexStringToBytes(r[1]);
      ok = ok && md5->size() == 16;
    } else if (key == "crc32c") {
      ok = ok && Int(r, &v) && v >= 0 && v <= 0xFFFFFFFFll;
      crc = static_cast<uint32_t>(v);
    } else if (key == "content_type" && r.size() == 2) {
      m.attrs.content_type = r[1];
    } else if (key == "meta" && r.size() == 3) {
      m.attrs.metadata[r[1]] = r[2];
    }
  }
  if (!ok || !have_size || !have_mtime || !have_ino) return std::nullopt;
  if (md5 && crc) m.checksums = common::Checksums{*md5, *crc};
  return m;
}

std::string EncodeSession(const SessionRecord& s) {
  RecordWriter w(kSessionMagic);
  w.Add("bucket", s.bucket);
  w.Add("name", s.name);
  w.Add("owner", s.owner);
  w.Add("created", s.created_us);
  AddOptions(w, s.options);
  return w.Take();
}

std::optional<SessionRecord> DecodeSession(absl::string_view text) {
  auto records = ReadRecords(text, kSessionMagic);
  if (!records) return std::nullopt;
  SessionRecord s;
  bool ok = true;
  for (const auto& r : *records) {
    const std::string& key = r[0];
    if (key == "bucket" && r.size() == 2) {
      s.bucket = r[1];
    } else if (key == "name" && r.size() == 2) {
      s.name = r[1];
    } else if (key == "owner" && r.size() == 2) {
      s.owner = r[1];
    } else if (key == "created") {
      ok = ok && Int(r, &s.created_us);
    } else {
      ReadOption(r, s.options, &ok);
    }
  }
  if (!ok || s.bucket.empty() || s.name.empty()) return std::nullopt;
  return s;
}

}  // namespace mle::buckets
