#include "tpugraphs/eval/eval_indices.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/graph.h"

namespace tpugraphs::eval {
namespace {

// A recursive-descent reader for exactly the index-file shape: {"name": [int, ...], ...}.
class IndexJsonParser {
 public:
  IndexJsonParser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  StatusOr<IndexLists> Parse() {
    IndexLists lists;
    SkipSpace();
    if (pos_ == 0 && text_.substr(0, 3) == "\xEF\xBB\xBF") {  // UTF-8 byte-order mark
      pos_ = 3;
      SkipSpace();
    }
    TPUG_RETURN_IF_ERROR(Expect('{', "'{' opening the top-level object"));
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
    } else {
      while (true) {
        SkipSpace();
        const size_t key_pos = pos_;
        std::string key;
        TPUG_RETURN_IF_ERROR(ParseString(&key));
        SkipSpace();
        TPUG_RETURN_IF_ERROR(Expect(':', "':' after an object key"));
        SkipSpace();
        std::vector<int64_t> values;
        TPUG_RETURN_IF_ERROR(ParseIntArray(&values));
        if (lists.count(key) != 0) {
          return ErrorAt(key_pos, "duplicate graph name \"" + key + "\"");
        }
        lists.emplace(std::move(key), std::move(values));
        SkipSpace();
        if (Peek() == ',') {
          ++pos_;
          continue;
        }
        TPUG_RETURN_IF_ERROR(Expect('}', "',' or '}' after an array"));
        break;
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return ErrorAt(pos_, "unexpected text after the top-level object");
    return lists;
  }

 private:
  int Peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  Status ErrorAt(size_t pos, const std::string& problem) const {
    int64_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return InvalidArgumentError(std::string(what_) + ":" + std::to_string(line) + ":" +
                                std::to_string(col) + ": malformed eval-index JSON: " + problem);
  }

  std::string Describe() const {
    if (pos_ >= text_.size()) return "end of file";
    const unsigned char c = text_[pos_];
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    return "byte " + std::to_string(c);
  }

  Status Expect(char c, const std::string& what) {
    if (Peek() != static_cast<unsigned char>(c)) {
      return ErrorAt(pos_, "expected " + what + ", found " + Describe());
    }
    ++pos_;
    return Status::Ok();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status ParseString(std::string* out) {
    if (Peek() != '"') return ErrorAt(pos_, "expected a string key, found " + Describe());
    ++pos_;
    while (true) {
      if (pos_ >= text_.size()) return ErrorAt(pos_, "unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return ErrorAt(pos_, "control character inside a string");
      }
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= text_.size()) return ErrorAt(pos_, "unterminated escape");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return ErrorAt(pos_, "truncated \\u escape");
          uint32_t cp = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = text_[pos_ + i];
            cp <<= 4;
            if (h >= '0' && h <= '9') {
              cp |= h - '0';
            } else if (h >= 'a' && h <= 'f') {
              cp |= h - 'a' + 10;
            } else if (h >= 'A' && h <= 'F') {
              cp |= h - 'A' + 10;
            } else {
              return ErrorAt(pos_ + i, "bad hex digit in \\u escape");
            }
          }
          pos_ += 4;
          AppendUtf8(cp, out);  // graph names are ASCII; surrogates are passed through as is
          break;
        }
        default:
          return ErrorAt(pos_ - 1, std::string("unknown escape \\") + e);
      }
    }
  }

  Status ParseIntArray(std::vector<int64_t>* out) {
    if (Peek() != '[') {
      return ErrorAt(pos_, "expected '[' starting the index list, found " + Describe());
    }
    ++pos_;
    SkipSpace();
    if (Peek() == ']') {
      ++pos_;
      return Status::Ok();
    }
    while (true) {
      SkipSpace();
      const size_t start = pos_;
      if (Peek() == '-') {
        return ErrorAt(start, "negative config index");
      }
      int64_t v = 0;
      size_t digits = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (v > (int64_t{1} << 50)) return ErrorAt(start, "config index too large");
        v = v * 10 + (text_[pos_] - '0');
        ++pos_;
        ++digits;
      }
      if (digits == 0) {
        return ErrorAt(start,
                       "expected a config index (non-negative integer), found " + Describe());
      }
      if (digits > 1 && text_[start] == '0') return ErrorAt(start, "number with a leading zero");
      if (Peek() == '.' || Peek() == 'e' || Peek() == 'E') {
        return ErrorAt(start, "config index is not an integer");
      }
      out->push_back(v);
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      return Expect(']', "',' or ']' in the index list");
    }
  }

  std::string_view text_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace

StatusOr<IndexLists> ParseEvalIndexJson(std::string_view text, std::string_view what) {
  return IndexJsonParser(text, what).Parse();
}

StatusOr<std::string> CollectionOfIndexFile(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string stem = p.stem().string();
  const size_t us = stem.find('_');
  if (p.extension() != ".json" || us == std::string::npos || us == 0 || us + 1 == stem.size()) {
    return InvalidArgumentError(path +
                                ": eval-index file names must be <source>_<search>.json "
                                "(e.g. xla_random.json) so that the collection is known");
  }
  std::string collection = "layout:" + stem.substr(0, us) + ":" + stem.substr(us + 1);
  if (Status s = ValidateCollection(collection); !s.ok()) {
    return InvalidArgumentError(path + ": file name gives collection \"" + collection +
                                "\": " + s.message());
  }
  return collection;
}

StatusOr<EvalIndices> EvalIndices::Load(const std::string& dir_or_file) {
  std::error_code ec;
  std::vector<std::string> files;
  if (std::filesystem::is_directory(dir_or_file, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir_or_file, ec)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path().string());
    }
    if (ec) return IoError(dir_or_file + ": cannot list directory: " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) return NotFoundError(dir_or_file + ": no *.json eval-index files");
  } else {
    files.push_back(dir_or_file);
  }
  EvalIndices out;
  for (const std::string& file : files) {
    TPUG_ASSIGN_OR_RETURN(std::string collection, CollectionOfIndexFile(file));
    TPUG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
    TPUG_ASSIGN_OR_RETURN(IndexLists lists, ParseEvalIndexJson(text, file));
    TPUG_RETURN_IF_ERROR(out.Add(std::move(collection), file, std::move(lists)));
  }
  return out;
}

Status EvalIndices::Add(std::string collection, std::string source_path, IndexLists lists) {
  auto it = by_collection_.find(collection);
  if (it != by_collection_.end()) {
    return InvalidArgumentError(source_path + ": collection " + collection +
                                " already has eval indices from " + it->second.source_path);
  }
  by_collection_.emplace(std::move(collection), Entry{std::move(source_path), std::move(lists)});
  return Status::Ok();
}

bool EvalIndices::Covers(std::string_view collection) const {
  return by_collection_.find(collection) != by_collection_.end();
}

const std::vector<int64_t>* EvalIndices::Find(std::string_view collection,
                                              std::string_view name) const {
  const IndexLists* lists = Lists(collection);
  if (lists == nullptr) return nullptr;
  auto it = lists->find(name);
  return it == lists->end() ? nullptr : &it->second;
}

const IndexLists* EvalIndices::Lists(std::string_view collection) const {
  auto it = by_collection_.find(collection);
  return it == by_collection_.end() ? nullptr : &it->second.lists;
}

std::string EvalIndices::SourceOf(std::string_view collection) const {
  auto it = by_collection_.find(collection);
  return it == by_collection_.end() ? std::string() : it->second.source_path;
}

std::vector<std::string> EvalIndices::collections() const {
  std::vector<std::string> out;
  for (const auto& [c, e] : by_collection_) out.push_back(c);
  return out;
}

}  // namespace tpugraphs::eval
