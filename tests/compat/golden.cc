#include "compat/golden.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/unknown_field_set.h>

namespace herd::compat {
namespace {

void Walk(const google::protobuf::Message& m, const std::string& path, std::vector<std::string>* out) {
  const google::protobuf::Reflection* r = m.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = r->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    out->push_back(path + "#" + std::to_string(unknown.field(i).number()));
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string p = path.empty() ? f->name() : path + "." + f->name();
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) Walk(r->GetRepeatedMessage(m, f, i), p, out);
    } else {
      Walk(r->GetMessage(m, f), p, out);
    }
  }
}

}  // namespace

std::vector<std::string> UnknownFields(const google::protobuf::Message& m) {
  std::vector<std::string> out;
  Walk(m, "", &out);
  return out;
}

}  // namespace herd::compat
