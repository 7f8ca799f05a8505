// .npy header parsing/formatting and element conversion. Format facts from numpy's
// numpy/lib/format.py documentation (NEP 1): magic "\x93NUMPY", version bytes, header length
// (uint16 for 1.0, uint32 for 2.0/3.0), dict with keys descr/fortran_order/shape, total preamble
// padded to a multiple of 64 bytes and ended by '\n'.
#include "tpugraphs/io/npy.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tpugraphs::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;

std::string Printable(std::string_view s, size_t max = 60) {
  std::string out;
  for (char c : s.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out.push_back(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

// A tiny parser for the Python dict literal numpy writes.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Status Parse(NpyHeader* h) {
    bool have_descr = false, have_order = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("header does not start with '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      std::string key;
      TPUG_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        if (Peek() == '[') {
          return UnimplementedError(where_ + ": structured dtypes are not supported (descr " +
                                    Printable(s_.substr(pos_)) + ")");
        }
        std::string descr;
        TPUG_RETURN_IF_ERROR(ParseString(&descr));
        TPUG_RETURN_IF_ERROR(ParseDescr(descr, h));
        have_descr = true;
      } else if (key == "fortran_order") {
        if (ConsumeWord("True")) {
          h->fortran_order = true;
        } else if (ConsumeWord("False")) {
          h->fortran_order = false;
        } else {
          return Error("fortran_order is neither True nor False");
        }
        have_order = true;
      } else if (key == "shape") {
        TPUG_RETURN_IF_ERROR(ParseShape(&h->shape));
        have_shape = true;
      } else {
        return Error("unexpected key '" + key + "'");
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}' after the value of '" + key + "'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the closing '}'");
    if (!have_descr || !have_order || !have_shape) {
      return Error("missing key (needs descr, fortran_order and shape)");
    }
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgumentError(where_ + ": malformed npy header: " + what + " in \"" +
                                Printable(s_, 200) + "\"");
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  Status ParseString(std::string* out) {
    char q = Peek();
    if (q != '\'' && q != '"') return Error("expected a quoted string");
    ++pos_;
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return Status::Ok();
  }
  Status ParseShape(std::vector<int64_t>* shape) {
    shape->clear();
    if (!Consume('(')) return Error("shape is not a tuple");
    while (true) {
      SkipSpace();
      if (Consume(')')) return Status::Ok();
      if (Peek() == '-') return Error("negative dimension in shape");
      if (Peek() < '0' || Peek() > '9') return Error("shape holds a non-integer");
      uint64_t v = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        uint64_t d = static_cast<uint64_t>(Peek() - '0');
        if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10) {
          return Error("dimension too large");
        }
        v = v * 10 + d;
        ++pos_;
      }
      Consume('L');  // Python 2 long suffix, as written by old numpy
      shape->push_back(static_cast<int64_t>(v));
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) {
        return Status::Ok();
      }
      return Error("expected ',' or ')' in shape");
    }
  }
  Status ParseDescr(const std::string& descr, NpyHeader* h) {
    if (descr.size() < 2) return Unsupported(descr);
    char order = descr[0];
    std::string_view type = std::string_view(descr).substr(1);
    if (order != '<' && order != '>' && order != '|' && order != '=') {
      order = '=';
      type = descr;
    }
    static const struct {
      std::string_view name;
      DType dtype;
    } kTypes[] = {{"b1", DType::kBool},   {"?", DType::kBool},     {"i1", DType::kInt8},
                  {"u1", DType::kUInt8},  {"i2", DType::kInt16},   {"u2", DType::kUInt16},
                  {"i4", DType::kInt32},  {"u4", DType::kUInt32},  {"i8", DType::kInt64},
                  {"u8", DType::kUInt64}, {"f4", DType::kFloat32}, {"f8", DType::kFloat64}};
    for (const auto& t : kTypes) {
      if (t.name == type) {
        h->dtype = t.dtype;
        h->big_endian = order == '>' && DTypeSize(t.dtype) > 1;
        return Status::Ok();
      }
    }
    return Unsupported(descr);
  }
  Status Unsupported(const std::string& descr) const {
    return UnimplementedError(where_ + ": unsupported npy dtype '" + Printable(descr) +
                              "' (supported: b1 i1 u1 i2 u2 i4 u4 i8 u8 f4 f8, either byte order)");
  }

  std::string_view s_;
  const std::string& where_;
  size_t pos_ = 0;
};

Status CheckSizes(NpyHeader* h, const std::string& where) {
  uint64_t n = 1;
  const uint64_t item = DTypeSize(h->dtype);
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / item;
  for (int64_t d : h->shape) {
    if (d < 0) return InvalidArgumentError(where + ": negative dimension in npy shape");
    if (d != 0 && n > limit / static_cast<uint64_t>(d)) {
      return DataLossError(where + ": npy shape " + h->DebugString() +
                           " has more elements than any file can hold");
    }
    n *= static_cast<uint64_t>(d);
  }
  return Status::Ok();
}

StatusOr<NpyHeader> ParsePreambleAndDict(const std::function<Status(void*, size_t)>& read_exact,
                                         uint64_t available, const std::string& where) {
  if (available < kMagicLen + 4) {
    return DataLossError(where + ": only " + std::to_string(available) +
                         " bytes, too short for an npy header");
  }
  unsigned char pre[12];
  TPUG_RETURN_IF_ERROR(read_exact(pre, 8));
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) {
    return InvalidArgumentError(
        where + ": not an npy array (bad magic \"" +
        Printable(std::string_view(reinterpret_cast<const char*>(pre), kMagicLen)) +
        "\", expected \"\\x93NUMPY\")");
  }
  NpyHeader h;
  h.major_version = pre[6];
  h.minor_version = pre[7];
  if (h.major_version < 1 || h.major_version > 3 || h.minor_version != 0) {
    return UnimplementedError(where + ": npy format version " + std::to_string(h.major_version) +
                              "." + std::to_string(h.minor_version) +
                              " is not supported (supported: 1.0, 2.0, 3.0)");
  }
  uint64_t len_bytes = h.major_version == 1 ? 2 : 4;
  if (available < 8 + len_bytes) {
    return DataLossError(where + ": truncated npy preamble");
  }
  TPUG_RETURN_IF_ERROR(read_exact(pre + 8, len_bytes));
  uint64_t header_len = pre[8] | (pre[9] << 8);
  if (len_bytes == 4) {
    header_len |= (static_cast<uint64_t>(pre[10]) << 16) | (static_cast<uint64_t>(pre[11]) << 24);
  }
  h.header_bytes = 8 + len_bytes + header_len;
  if (h.header_bytes > available) {
    return DataLossError(where + ": npy header declares " + std::to_string(header_len) +
                         " bytes but only " + std::to_string(available - 8 - len_bytes) +
                         " follow");
  }
  if (header_len > kMaxNpyHeaderBytes) {
    return InvalidArgumentError(where + ": npy header of " + std::to_string(header_len) +
                                " bytes is implausibly long");
  }
  std::string text(header_len, '\0');
  TPUG_RETURN_IF_ERROR(read_exact(text.data(), header_len));
  if (h.major_version < 3) {
    for (unsigned char c : text) {
      if (c >= 0x80) {
        return InvalidArgumentError(where + ": npy " + std::to_string(h.major_version) +
                                    ".0 header holds non-ASCII bytes");
      }
    }
  }
  HeaderParser parser(text, where);
  TPUG_RETURN_IF_ERROR(parser.Parse(&h));
  TPUG_RETURN_IF_ERROR(CheckSizes(&h, where));
  return h;
}

// Byte swapping without C++23's std::byteswap.
template <typename U>
U Swap(U v) {
  if constexpr (sizeof(U) == 1) {
    return v;
  } else if constexpr (sizeof(U) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(U) == 4) {
    return __builtin_bswap32(v);
  } else {
    return __builtin_bswap64(v);
  }
}

template <size_t N>
struct UIntOf;
template <>
struct UIntOf<1> {
  using type = uint8_t;
};
template <>
struct UIntOf<2> {
  using type = uint16_t;
};
template <>
struct UIntOf<4> {
  using type = uint32_t;
};
template <>
struct UIntOf<8> {
  using type = uint64_t;
};

template <typename S>
S Load(const unsigned char* p, bool swap) {
  using U = typename UIntOf<sizeof(S)>::type;
  U u;
  std::memcpy(&u, p, sizeof(U));
  if (swap) u = Swap(u);
  if constexpr (std::is_same_v<S, bool>) {
    return u != 0;
  } else {
    S s;
    std::memcpy(&s, &u, sizeof(S));
    return s;
  }
}

template <typename V>
std::string ValueText(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_same_v<V, bool>) {
    return v ? "True" : "False";
  } else {
    return std::to_string(v);
  }
}

template <typename T>
std::string TypeText() {
  return std::string(DTypeName(DTypeOf<T>()));
}

template <typename S, typename T>
Status ConvertTyped(const unsigned char* raw, int64_t count, bool swap, T* out, int64_t first,
                    const std::string& where) {
  if constexpr (std::is_same_v<S, T> && !std::is_same_v<T, bool>) {
    if (!swap) {
      std::memcpy(out, raw, static_cast<size_t>(count) * sizeof(T));
      return Status::Ok();
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const S v = Load<S>(raw + static_cast<size_t>(i) * sizeof(S), swap);
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = static_cast<T>(v);
    } else if constexpr (std::is_floating_point_v<S>) {
      // float -> integer or bool: finite, integral, in [min, 2^digits).
      constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
      const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
      const double d = static_cast<double>(v);
      if (!std::isfinite(d) || d != std::trunc(d) || d < lo || d >= hi) {
        return InvalidArgumentError(
            where + ": element " + std::to_string(first + i) + " value " + ValueText(v) +
            (!std::isfinite(d) || d != std::trunc(d) ? " is not a finite integer"
                                                     : " is out of range") +
            "; cannot convert " + std::string(DTypeName(DTypeOf<S>())) + " to " + TypeText<T>());
      }
      out[i] = static_cast<T>(v);
    } else if constexpr (std::is_same_v<S, bool>) {
      out[i] = static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      if (v != 0 && v != 1) {
        return OutOfRangeError(where + ": element " + std::to_string(first + i) + " value " +
                               ValueText(v) + " does not fit in b1 (bool)");
      }
      out[i] = v != 0;
    } else {
      if (!std::in_range<T>(v)) {
        return OutOfRangeError(where + ": element " + std::to_string(first + i) + " value " +
                               ValueText(v) + " does not fit in " + TypeText<T>() + " (stored as " +
                               std::string(DTypeName(DTypeOf<S>())) + ")");
      }
      out[i] = static_cast<T>(v);
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "b1";
    case DType::kInt8:
      return "i1";
    case DType::kUInt8:
      return "u1";
    case DType::kInt16:
      return "i2";
    case DType::kUInt16:
      return "u2";
    case DType::kInt32:
      return "i4";
    case DType::kUInt32:
      return "u4";
    case DType::kInt64:
      return "i8";
    case DType::kUInt64:
      return "u8";
    case DType::kFloat32:
      return "f4";
    case DType::kFloat64:
      return "f8";
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
  }
  return 1;
}

bool IsFloatDType(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kFloat64; }

int64_t NpyHeader::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t NpyHeader::data_bytes() const {
  return static_cast<uint64_t>(num_elements()) * DTypeSize(dtype);
}

bool NpyHeader::file_order_is_c() const {
  if (!fortran_order) return true;
  int long_dims = 0;
  for (int64_t d : shape) {
    if (d == 0) return true;
    if (d > 1) ++long_dims;
  }
  return long_dims <= 1;
}

std::string NpyHeader::DebugString() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  s += ") ";
  s += DTypeSize(dtype) == 1 ? '|' : (big_endian ? '>' : '<');
  s += DTypeName(dtype);
  if (fortran_order) s += " fortran";
  return s;
}

StatusOr<NpyHeader> ReadNpyHeader(const std::function<Status(void* dst, size_t n)>& read_exact,
                                  uint64_t available, const std::string& where) {
  TPUG_ASSIGN_OR_RETURN(NpyHeader h, ParsePreambleAndDict(read_exact, available, where));
  const uint64_t have = available - h.header_bytes;
  const uint64_t need = h.data_bytes();
  if (need > have) {
    return DataLossError(where + ": npy header declares shape " + h.DebugString() + " (" +
                         std::to_string(need) + " data bytes) but only " + std::to_string(have) +
                         " bytes follow the header; truncated or corrupt array");
  }
  if (need < have) {
    return DataLossError(where + ": " + std::to_string(have - need) +
                         " unexpected bytes after the data of shape " + h.DebugString());
  }
  return h;
}

StatusOr<NpyHeader> ParseNpyHeader(std::string_view bytes, const std::string& where) {
  size_t pos = 0;
  auto read = [&](void* dst, size_t n) -> Status {
    if (bytes.size() - pos < n) return DataLossError(where + ": truncated npy header");
    std::memcpy(dst, bytes.data() + pos, n);
    pos += n;
    return Status::Ok();
  };
  return ParsePreambleAndDict(read, bytes.size(), where);
}

std::string FormatNpyHeader(DType dtype, const std::vector<int64_t>& shape, bool big_endian,
                            bool fortran_order) {
  std::string dict = "{'descr': '";
  dict += DTypeSize(dtype) == 1 ? '|' : (big_endian ? '>' : '<');
  dict += DTypeName(dtype);
  dict += "', 'fortran_order': ";
  dict += fortran_order ? "True" : "False";
  dict += ", 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dict += ",";
  dict += "), }";
  // Preamble of 10 bytes (1.0) or 12 bytes (2.0); total padded to 64 with spaces, then '\n'.
  int major = 1;
  size_t preamble = 10;
  size_t total = (preamble + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  if (total - preamble > 0xFFFF) {
    major = 2;
    preamble = 12;
    total = (preamble + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  }
  const size_t header_len = total - preamble;
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xFF));
  }
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out.push_back('\n');
  return out;
}

template <typename T>
Status ConvertElements(DType src, bool big_endian, const void* raw, int64_t count, T* out,
                       int64_t first_index, const std::string& where) {
  const auto* p = static_cast<const unsigned char*>(raw);
  const bool swap = (big_endian != (std::endian::native == std::endian::big)) && DTypeSize(src) > 1;
  switch (src) {
    case DType::kBool:
      return ConvertTyped<bool>(p, count, swap, out, first_index, where);
    case DType::kInt8:
      return ConvertTyped<int8_t>(p, count, swap, out, first_index, where);
    case DType::kUInt8:
      return ConvertTyped<uint8_t>(p, count, swap, out, first_index, where);
    case DType::kInt16:
      return ConvertTyped<int16_t>(p, count, swap, out, first_index, where);
    case DType::kUInt16:
      return ConvertTyped<uint16_t>(p, count, swap, out, first_index, where);
    case DType::kInt32:
      return ConvertTyped<int32_t>(p, count, swap, out, first_index, where);
    case DType::kUInt32:
      return ConvertTyped<uint32_t>(p, count, swap, out, first_index, where);
    case DType::kInt64:
      return ConvertTyped<int64_t>(p, count, swap, out, first_index, where);
    case DType::kUInt64:
      return ConvertTyped<uint64_t>(p, count, swap, out, first_index, where);
    case DType::kFloat32:
      return ConvertTyped<float>(p, count, swap, out, first_index, where);
    case DType::kFloat64:
      return ConvertTyped<double>(p, count, swap, out, first_index, where);
  }
  return InternalError(where + ": unknown dtype");
}

template <typename T>
void ToLittleEndian(const T* src, size_t n, void* out) {
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    std::memcpy(out, src, n * sizeof(T));
  } else {
    using U = typename UIntOf<sizeof(T)>::type;
    auto* o = static_cast<unsigned char*>(out);
    for (size_t i = 0; i < n; ++i) {
      U u;
      std::memcpy(&u, src + i, sizeof(T));
      u = Swap(u);
      std::memcpy(o + i * sizeof(T), &u, sizeof(T));
    }
  }
}

#define TPUG_NPY_INSTANTIATE(T)                                                      \
  template Status ConvertElements<T>(DType, bool, const void*, int64_t, T*, int64_t, \
                                     const std::string&);                            \
  template void ToLittleEndian<T>(const T*, size_t, void*);
TPUG_NPY_INSTANTIATE(bool)
TPUG_NPY_INSTANTIATE(int8_t)
TPUG_NPY_INSTANTIATE(uint8_t)
TPUG_NPY_INSTANTIATE(int16_t)
TPUG_NPY_INSTANTIATE(uint16_t)
TPUG_NPY_INSTANTIATE(int32_t)
TPUG_NPY_INSTANTIATE(uint32_t)
TPUG_NPY_INSTANTIATE(int64_t)
TPUG_NPY_INSTANTIATE(uint64_t)
TPUG_NPY_INSTANTIATE(float)
TPUG_NPY_INSTANTIATE(double)
#undef TPUG_NPY_INSTANTIATE

}  // namespace tpugraphs::io
