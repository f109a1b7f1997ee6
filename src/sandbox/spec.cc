#include "sandbox/spec.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mle::sandbox {
namespace {

bool Clean(const std::string& field) { return field.find_first_of("\t\n") == std::string::npos && !field.empty(); }
bool Absolute(const std::string& path) { return Clean(path) && path[0] == '/'; }
// A directory's mode: 1 to 4 octal digits.
bool OctalMode(const std::string& mode) {
  return !mode.empty() && mode.size() <= 4 && mode.find_first_not_of("01234567") == std::string::npos;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    out.push_back(line.substr(start, tab - start));
  }
  out.push_back(line.substr(start));
  return out;
}

bool Number(const std::string& s, int base, unsigned long* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtoul(s.c_str(), &end, base);
  return errno == 0 && *end == '\0';
}

// A file's text on one line: \\, \n and \t escaped.
std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

bool Unescape(const std::string& field, std::string* text) {
  text->clear();
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      *text += field[i];
      continue;
    }
    if (++i == field.size()) return false;
    switch (field[i]) {
      case '\\': *text += '\\'; break;
      case 'n': *text += '\n'; break;
      case 't': *text += '\t'; break;
      default: return false;
    }
  }
  return true;
}

}  // namespace

bool EncodeSpec(const SandboxSpec& spec, std::string* text, std::string* error) {
  if (spec.uid == 0 || spec.gid == 0) {
    *error = "a sandboxed replica never runs as root (uid or gid 0)";
    return false;
  }
  if (!Absolute(spec.cwd)) {
    *error = "the working directory must be an absolute path without tabs or newlines: " + spec.cwd;
    return false;
  }
  std::string out = std::string(kSpecFormat) + "\n";
  out += "uid\t" + std::to_string(spec.uid) + "\n";
  out += "gid\t" + std::to_string(spec.gid) + "\n";
  char mask[16];
  std::snprintf(mask, sizeof(mask), "%03o", static_cast<unsigned>(spec.umask & 0777));
  out += std::string("umask\t") + mask + "\n";
  out += "cwd\t" + spec.cwd + "\n";
  for (const auto& dir : spec.cgroups) {
    if (!Absolute(dir)) {
      *error = "a cgroup must be an absolute path without tabs or newlines: " + dir;
      return false;
    }
    out += "cgroup\t" + dir + "\n";
  }
  for (const auto& e : spec.view) {
    if (!Absolute(e.target)) {
      *error = "a path in the view must be absolute, without tabs or newlines: " + e.target;
      return false;
    }
    const bool host_path = e.kind == ViewEntry::Kind::kBind || e.kind == ViewEntry::Kind::kDevice;
    if ((host_path && !Absolute(e.source)) ||
        ((e.kind == ViewEntry::Kind::kSymlink || e.kind == ViewEntry::Kind::kTmpfs) && !Clean(e.source)) ||
        (e.kind == ViewEntry::Kind::kDir && !e.source.empty() && !OctalMode(e.source))) {
      *error = "a source of the view is not a clean path: " + e.source;
      return false;
    }
    switch (e.kind) {
      case ViewEntry::Kind::kBind:
        out += std::string("bind\t") + (e.writable ? "rw" : "ro") + "\t" + e.source + "\t" + e.target + "\n";
        break;
      case ViewEntry::Kind::kDevice:
        out += "device\t" + e.source + "\t" + e.target + "\n";
        break;
      case ViewEntry::Kind::kSymlink:
        out += "symlink\t" + e.source + "\t" + e.target + "\n";
        break;
      case ViewEntry::Kind::kTmpfs:
        out += "tmpfs\t" + e.source + "\t" + e.target + "\n";
        break;
      case ViewEntry::Kind::kProc:
        out += "proc\t" + e.target + "\n";
        break;
      case ViewEntry::Kind::kDir:
        out += "dir\t" + (e.source.empty() ? "" : e.source + "\t") + e.target + "\n";
        break;
      case ViewEntry::Kind::kSysfs:
        out += "sysfs\t" + e.target + "\n";
        break;
      case ViewEntry::Kind::kFile:
        out += "file\t" + e.target + "\t" + Escape(e.source) + "\n";
        break;
    }
  }
  *text = std::move(out);
  return true;
}

bool ParseSpec(const std::string& text, SandboxSpec* spec, std::string* error) {
  *spec = SandboxSpec{};
  bool have_uid = false, have_gid = false, first = true;
  size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    auto fail = [&](const std::string& why) {
      *error = "line " + std::to_string(line_no) + ": " + why;
      return false;
    };
    if (first) {
      if (line != kSpecFormat) return fail(std::string("not a ") + kSpecFormat + " file");
      first = false;
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> f = Fields(line);
    const std::string& key = f[0];
    unsigned long n = 0;
    if (key == "uid" || key == "gid") {
      if (f.size() != 2 || !Number(f[1], 10, &n) || n == 0 || n > 0xfffffffeUL) return fail("bad " + key);
      if (key == "uid") {
        spec->uid = static_cast<uid_t>(n);
        have_uid = true;
      } else {
        spec->gid = static_cast<gid_t>(n);
        have_gid = true;
      }
    } else if (key == "umask") {
      if (f.size() != 2 || !Number(f[1], 8, &n) || n > 0777) return fail("bad umask");
      spec->umask = static_cast<mode_t>(n);
    } else if (key == "cwd") {
      if (f.size() != 2 || !Absolute(f[1])) return fail("bad cwd");
      spec->cwd = f[1];
    } else if (key == "cgroup") {
      if (f.size() != 2 || !Absolute(f[1])) return fail("bad cgroup");
      spec->cgroups.push_back(f[1]);
    } else if (key == "bind") {
      if (f.size() != 4 || (f[1] != "ro" && f[1] != "rw") || !Absolute(f[2]) || !Absolute(f[3])) {
        return fail("bad bind");
      }
      spec->view.push_back({ViewEntry::Kind::kBind, f[1] == "rw", f[2], f[3]});
    } else if (key == "device") {
      if (f.size() != 3 || !Absolute(f[1]) || !Absolute(f[2])) return fail("bad device");
      spec->view.push_back({ViewEntry::Kind::kDevice, true, f[1], f[2]});
    } else if (key == "symlink") {
      if (f.size() != 3 || !Clean(f[1]) || !Absolute(f[2])) return fail("bad symlink");
      spec->view.push_back({ViewEntry::Kind::kSymlink, false, f[1], f[2]});
    } else if (key == "tmpfs") {
      if (f.size() != 3 || !Clean(f[1]) || !Absolute(f[2])) return fail("bad tmpfs");
      spec->view.push_back({ViewEntry::Kind::kTmpfs, true, f[1], f[2]});
    } else if (key == "proc") {
      if (f.size() != 2 || !Absolute(f[1])) return fail("bad proc");
      spec->view.push_back({ViewEntry::Kind::kProc, false, "", f[1]});
    } else if (key == "sysfs") {
      if (f.size() != 2 || !Absolute(f[1])) return fail("bad sysfs");
      spec->view.push_back({ViewEntry::Kind::kSysfs, false, "", f[1]});
    } else if (key == "file") {
      std::string contents;
      if (f.size() != 3 || !Absolute(f[1]) || !Unescape(f[2], &contents)) return fail("bad file");
      spec->view.push_back({ViewEntry::Kind::kFile, false, std::move(contents), f[1]});
    } else if (key == "dir") {
      // dir [MODE] TARGET: MODE in octal (default 0755).
      const bool moded = f.size() == 3;
      if ((f.size() != 2 && !moded) || !Absolute(f.back()) || (moded && !OctalMode(f[1]))) {
        return fail("bad dir");
      }
      spec->view.push_back({ViewEntry::Kind::kDir, false, moded ? f[1] : "", f.back()});
    } else {
      return fail("unknown record " + key);
    }
  }
  if (first) {
    *error = "empty sandbox spec";
    return false;
  }
  if (!have_uid || !have_gid || spec->cwd.empty()) {
    *error = "the sandbox spec lacks its uid, gid or cwd";
    return false;
  }
  return true;
}

bool ReadSpec(const std::string& path, SandboxSpec* spec, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  if (!ParseSpec(text, spec, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace mle::sandbox
