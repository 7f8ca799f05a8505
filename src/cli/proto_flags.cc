#include "proto_flags.h"

namespace tpugraphs::cli {

using google::protobuf::FieldDescriptor;

ProtoFlags::ProtoFlags(CLI::App* cmd, const google::protobuf::Descriptor* descriptor,
                       std::span<const ProtoFlagHelp> table) {
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
    if (!f->is_repeated()) help += " [default: " + FieldDefaultString(f) + "]";
    const std::string flag = FieldFlagName(f->name()) + h.aliases;
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
    for (const std::string& v : *e.values) {
      TPUG_RETURN_IF_ERROR(SetFieldFromText(config, e.field, e.option->get_name(), v));
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
