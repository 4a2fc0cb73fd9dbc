#include "cell/checkpoint_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "absl/strings/str_cat.h"

namespace herd::cell {

absl::StatusOr<Checkpoint> ReadCheckpoint(std::istream& in, absl::string_view name) {
  std::string magic(kCheckpointMagic.size(), '\0');
  in.read(magic.data(), static_cast<std::streamsize>(magic.size()));
  if (!in || magic != kCheckpointMagic) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a Herd checkpoint"));
  }
  google::protobuf::io::IstreamInputStream zin(&in);
  google::protobuf::io::CodedInputStream coded(&zin);
  coded.SetTotalBytesLimit(INT32_MAX);
  Checkpoint cp;
  bool have_header = false, have_snapshot = false;
  int64_t n = 0;
  while (true) {
    uint32_t size;
    if (!coded.ReadVarint32(&size)) break;
    auto limit = coded.PushLimit(static_cast<int>(size));
    v1::CheckpointRecord rec;
    if (!rec.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      return absl::DataLossError(absl::StrCat(name, ": record ", n, " is corrupt or truncated"));
    }
    coded.PopLimit(limit);
    ++n;
    if (rec.has_header()) {
      cp.header = rec.header();
      have_header = true;
    } else if (rec.has_snapshot()) {
      cp.snapshot = std::move(*rec.mutable_snapshot());
      have_snapshot = true;
    } else if (rec.has_mutation()) {
      if (!have_snapshot) return absl::DataLossError(absl::StrCat(name, ": a mutation comes before the snapshot"));
      int64_t want = cp.log.empty() ? cp.snapshot.revision() + 1 : cp.log.back().revision() + 1;
      if (rec.mutation().revision() != want) {
        return absl::DataLossError(
            absl::StrCat(name, ": revision ", rec.mutation().revision(), " where ", want, " was expected"));
      }
      cp.log.push_back(std::move(*rec.mutable_mutation()));
    }
  }
  if (!have_header || !have_snapshot) return absl::DataLossError(absl::StrCat(name, " has no header or snapshot"));
  return cp;
}

CheckpointWriter::CheckpointWriter(std::ostream* out) : out_(out) {}

absl::Status CheckpointWriter::Write(const v1::CheckpointRecord& record) {
  if (!started_) {
    out_->write(kCheckpointMagic.data(), static_cast<std::streamsize>(kCheckpointMagic.size()));
    started_ = true;
  }
  google::protobuf::io::OstreamOutputStream zout(out_);
  google::protobuf::io::CodedOutputStream coded(&zout);
  coded.WriteVarint32(static_cast<uint32_t>(record.ByteSizeLong()));
  record.SerializeWithCachedSizes(&coded);
  if (coded.HadError()) return absl::DataLossError("cannot write a checkpoint record");
  return absl::OkStatus();
}

}  // namespace herd::cell
