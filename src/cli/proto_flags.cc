#include "proto_flags.h"

namespace tpugraphs::cli {

using google::protobuf::FieldDescriptor;

ProtoFlags::ProtoFlags(CLI::App* cmd, const google::protobuf::Descriptor* descriptor,
                       std::span<const ProtoFlagHelp> table,
                       const google::protobuf::Message* defaults) {
  for (const ProtoFlagHelp& h : table) {
    Entry e;
    e.path = h.path;
    e.field = ResolveFieldPath(descriptor, h.path);
    if (e.field.field == nullptr) continue;
    const FieldDescriptor* f = e.field.field;
    std::string help = h.help;
    if (const std::string choices = EnumChoices(f); !choices.empty()) {
      help += " {" + choices + "}";
    }
    if (!f->is_repeated()) {
      const google::protobuf::Message* holder = defaults;
      if (holder != nullptr && e.field.parent != nullptr) {
        holder = &holder->GetReflection()->GetMessage(*holder, e.field.parent);
      }
      help += " [default: " +
              (holder != nullptr ? FieldValueString(*holder, f) : FieldDefaultString(f)) + "]";
    }
    const std::string flag =
        (h.flag != nullptr ? std::string(h.flag) : FieldFlagName(f->name())) + h.aliases;
    if (f->is_repeated()) {
      e.values = std::make_unique<std::vector<std::string>>();
      e.option = cmd->add_option(flag, *e.values, help + " (repeatable)");
      e.option->allow_extra_args(false);
    } else {
      e.value = std::make_unique<std::string>();
      e.option = cmd->add_option(flag, *e.value, help);
    }
    e.option->type_name(f->cpp_type() == FieldDescriptor::CPPTYPE_STRING ? "TEXT" : "VALUE");
    entries_.push_back(std::move(e));
  }
}

Status ProtoFlags::Apply(google::protobuf::Message* config) const {
  for (const Entry& e : entries_) {
    if (e.option->count() == 0) continue;
    const FieldDescriptor* f = e.field.field;
    if (f->is_repeated()) {
      google::protobuf::Message* m = config;
      if (e.field.parent != nullptr) {
        m = config->GetReflection()->MutableMessage(config, e.field.parent);
      }
      m->GetReflection()->ClearField(m, f);
    }
    if (!f->is_repeated()) {
      TPUG_RETURN_IF_ERROR(SetFieldFromText(config, e.field, e.option->get_name(), *e.value));
      continue;
    }
    const bool lists = f->cpp_type() != FieldDescriptor::CPPTYPE_STRING;
    for (const std::string& v : *e.values) {
      size_t start = 0;
      while (true) {
        const size_t end = lists ? v.find(',', start) : std::string::npos;
        TPUG_RETURN_IF_ERROR(
            SetFieldFromText(config, e.field, e.option->get_name(), v.substr(start, end - start)));
        if (end == std::string::npos) break;
        start = end + 1;
      }
    }
  }
  return Status::Ok();
}

CLI::Option* ProtoFlags::option(const std::string& path) const {
  for (const Entry& e : entries_) {
    if (e.path == path) return e.option;
  }
  return nullptr;
}

}  // namespace tpugraphs::cli
