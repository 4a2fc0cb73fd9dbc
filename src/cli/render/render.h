// Output for people (aligned tables, ages, resources) and for programs
// (the protobuf JSON form of API objects, which is a stable interface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "herd/v1/objects.pb.h"

namespace herd::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string ToString() const;
  size_t size() const { return rows_.size() - 1; }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// Canonical proto3 JSON, indented, with enum names and default values.
std::string ToJson(const google::protobuf::Message& m);
// The same on one line: for streams, one message a line.
std::string ToJsonLine(const google::protobuf::Message& m);

// "5s", "3m", "2h", "4d" since `ms` (wall time); "-" if 0.
std::string Age(int64_t ms, int64_t now_ms);
std::string StateName(v1::Task::State s);
std::string PhaseName(v1::Task::Phase p);
std::string TransitionName(v1::Event::Transition t);
// "cpu 500m, mem 64Mi" style summary for tables.
std::string ShortResources(const v1::Resources& r);
int64_t NowMs();
// Task indexes as ranges: {7, 0, 1, 2, 5} -> "0-2, 5, 7".
std::string IndexRanges(std::vector<int32_t> indexes);

}  // namespace herd::cli
