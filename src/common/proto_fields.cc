#include "tpugraphs/common/proto_fields.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tpugraphs {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

namespace {

// "Optimizer" -> "OPTIMIZER"; "TileJoin" -> "TILE_JOIN".
std::string UpperSnake(const std::string& camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(camel[i]))) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(camel[i])));
  }
  return out;
}

}  // namespace

ProtoFieldPath ResolveFieldPath(const Descriptor* descriptor, std::string_view path) {
  ProtoFieldPath r;
  const size_t dot = path.find('.');
  if (dot == std::string_view::npos) {
    r.field = descriptor->FindFieldByName(std::string(path));
    return r;
  }
  r.parent = descriptor->FindFieldByName(std::string(path.substr(0, dot)));
  if (r.parent != nullptr && r.parent->message_type() != nullptr && !r.parent->is_repeated()) {
    r.field = r.parent->message_type()->FindFieldByName(std::string(path.substr(dot + 1)));
  }
  return r;
}

ProtoFieldPath FindFieldByKeyword(const Descriptor* descriptor, std::string_view name) {
  ProtoFieldPath r;
  const std::string key(name);
  r.field = descriptor->FindFieldByName(key);
  if (r.field != nullptr) return r;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* parent = descriptor->field(i);
    if (parent->message_type() == nullptr || parent->is_repeated()) continue;
    if (const FieldDescriptor* f = parent->message_type()->FindFieldByName(key)) {
      r.parent = parent;
      r.field = f;
      return r;
    }
  }
  return r;
}

std::string FieldFlagName(std::string_view field_name) {
  std::string flag = "--";
  for (char c : field_name) flag += c == '_' ? '-' : c;
  return flag;
}

std::string EnumValueFlagName(const EnumDescriptor* e, int index) {
  std::string name = e->value(index)->name();
  const std::string prefix = UpperSnake(e->name()) + "_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string EnumChoices(const FieldDescriptor* field) {
  std::string choices;
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_ENUM) return choices;
  for (int i = 0; i < field->enum_type()->value_count(); ++i) {
    if (!choices.empty()) choices += '|';
    choices += EnumValueFlagName(field->enum_type(), i);
  }
  return choices;
}

std::string FieldDefaultString(const FieldDescriptor* f) {
  char buf[64];
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(f->default_value_int32());
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(f->default_value_int64());
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(f->default_value_uint32());
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(f->default_value_uint64());
    case FieldDescriptor::CPPTYPE_DOUBLE:
      std::snprintf(buf, sizeof(buf), "%g", f->default_value_double());
      return buf;
    case FieldDescriptor::CPPTYPE_FLOAT:
      std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(f->default_value_float()));
      return buf;
    case FieldDescriptor::CPPTYPE_BOOL:
      return f->default_value_bool() ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumValueFlagName(f->enum_type(), f->default_value_enum()->index());
    case FieldDescriptor::CPPTYPE_STRING:
      return "\"" + f->default_value_string() + "\"";
    default:
      return "";
  }
}

std::string FieldValueString(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  char buf[64];
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      std::snprintf(buf, sizeof(buf), "%g", r->GetDouble(m, f));
      return buf;
    case FieldDescriptor::CPPTYPE_FLOAT:
      std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(r->GetFloat(m, f)));
      return buf;
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(m, f) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumValueFlagName(f->enum_type(), r->GetEnum(m, f)->index());
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string quoted = "\"";
      quoted.append(r->GetString(m, f));
      quoted.push_back('"');
      return quoted;
    }
    default:
      return "";
  }
}

Status SetFieldFromText(Message* root, const ProtoFieldPath& path, std::string_view name_for_errors,
                        std::string_view text_view) {
  const std::string text(text_view);
  const FieldDescriptor* f = path.field;
  auto bad = [&](const std::string& what) {
    return UsageError("usage: " + std::string(name_for_errors) + ": " + what + ", got \"" + text +
                      "\"");
  };
  if (f == nullptr) return bad("no such option");
  Message* m = root;
  if (path.parent != nullptr) m = root->GetReflection()->MutableMessage(root, path.parent);
  const Reflection* r = m->GetReflection();
  const bool repeated = f->is_repeated();
  char* end = nullptr;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: {
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno != 0) return bad("expected an integer");
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        if (v < INT32_MIN || v > INT32_MAX) return bad("out of range");
        repeated ? r->AddInt32(m, f, static_cast<int32_t>(v))
                 : r->SetInt32(m, f, static_cast<int32_t>(v));
      } else {
        repeated ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
      }
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0) {
        return bad("expected a non-negative integer");
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32) {
        if (v > UINT32_MAX) return bad("out of range");
        repeated ? r->AddUInt32(m, f, static_cast<uint32_t>(v))
                 : r->SetUInt32(m, f, static_cast<uint32_t>(v));
      } else {
        repeated ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
      }
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') return bad("expected a number");
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
        repeated ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
      } else {
        repeated ? r->AddFloat(m, f, static_cast<float>(v))
                 : r->SetFloat(m, f, static_cast<float>(v));
      }
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v = false;
      if (text == "true" || text == "1") {
        v = true;
      } else if (text != "false" && text != "0") {
        return bad("expected true or false");
      }
      repeated ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
      return Status::Ok();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      std::string choices;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) {
        const std::string name = EnumValueFlagName(f->enum_type(), i);
        if (name == text) {
          repeated ? r->AddEnum(m, f, f->enum_type()->value(i))
                   : r->SetEnum(m, f, f->enum_type()->value(i));
          return Status::Ok();
        }
        if (!choices.empty()) choices += ", ";
        choices += name;
      }
      return bad("expected one of " + choices);
    }
    case FieldDescriptor::CPPTYPE_STRING:
      repeated ? r->AddString(m, f, text) : r->SetString(m, f, text);
      return Status::Ok();
    default:
      return bad("unsupported field type");
  }
}

void ClearDefaultFields(google::protobuf::Message* message) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*message, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) continue;
    bool is_default = false;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        google::protobuf::Message* sub = r->MutableMessage(message, f);
        ClearDefaultFields(sub);
        is_default = sub->ByteSizeLong() == 0;
        break;
      }
      case FieldDescriptor::CPPTYPE_INT32:
        is_default = r->GetInt32(*message, f) == f->default_value_int32();
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        is_default = r->GetInt64(*message, f) == f->default_value_int64();
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        is_default = r->GetUInt32(*message, f) == f->default_value_uint32();
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        is_default = r->GetUInt64(*message, f) == f->default_value_uint64();
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        is_default = r->GetDouble(*message, f) == f->default_value_double();
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        is_default = r->GetFloat(*message, f) == f->default_value_float();
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        is_default = r->GetBool(*message, f) == f->default_value_bool();
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        is_default = r->GetEnumValue(*message, f) == f->default_value_enum()->number();
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        is_default = r->GetString(*message, f) == f->default_value_string();
        break;
    }
    if (is_default) r->ClearField(message, f);
  }
}

}  // namespace tpugraphs
