// A pickle (protocol 2) writer for the few value kinds a flight-recorder dump holds: dicts, lists, 2-tuples,
// str, int, float, bool and None. It runs without the GIL, so a rank stuck in Python can still dump;
// Python's pickle.load reads the result.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tinytorch::dist::fr {

class Pickler {
 public:
  Pickler() { out_ += "\x80\x02"; }

  void none() { out_ += 'N'; }
  void boolean(bool v) { out_ += v ? '\x88' : '\x89'; }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      append_le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
      return;
    }
    out_ += '\x8a';  // LONG1: length byte, then little-endian two's complement
    out_ += static_cast<char>(8);
    append_le(static_cast<uint64_t>(v), 8);
  }
  void real(double v) {
    out_ += 'G';  // BINFLOAT is big-endian
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  void str(std::string_view s) {
    out_ += 'X';
    append_le(s.size(), 4);
    out_.append(s.data(), s.size());
  }
  // A dict key; the value follows: p.key("name").str(v).
  Pickler& key(std::string_view k) {
    str(k);
    return *this;
  }
  // Between begin and end: key, value, key, value, ...
  void begin_dict() { out_ += "}("; }
  void end_dict() { out_ += 'u'; }
  // Between begin and end: the items.
  void begin_list() { out_ += "]("; }
  void end_list() { out_ += 'e'; }
  // Turns the last two values written into a tuple.
  void tuple2() { out_ += '\x86'; }

  std::string finish() {
    out_ += '.';
    return std::move(out_);
  }

 private:
  void append_le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

}  // namespace tinytorch::dist::fr
