// Fuzz target: packets to the master's DNS responder (herd master --dns),
// which anyone who reaches its port may send, over UDP or TCP. The packet
// is parsed (dns::ParseQuery) and answered from a small cell (AnswerDns),
// as the responder does. Nothing may crash or read outside the packet; an
// answer is a response (QR) to the same id within the transport's size,
// or nothing; and a query that parses is answered, never dropped.
#include <google/protobuf/text_format.h>

#include "cell/cell_state.h"
#include "fuzz_util.h"
#include "master/core/naming/dns_wire.h"
#include "master/core/naming/names.h"

namespace {

// alice/web (2 tasks, one running on 10.0.0.1 with port http) and
// alice/v2.api on a machine known by a host name.
const herd::cell::CellState& Cell() {
  static const herd::cell::CellState* cell = [] {
    auto* s = new herd::cell::CellState("local");
    auto apply = [&](const std::string& text) {
      herd::v1::Mutation m;
      (void)google::protobuf::TextFormat::ParseFromString(text, &m);
      (void)s->Apply(m);
    };
    apply(R"(machine_registered { machine { name: "m1" address: "10.0.0.1:7071"
             capacity { cpu_millis: 4000 memory_bytes: 8589934592 ports: 100 } } })");
    apply(R"(machine_registered { machine { name: "m2" address: "node2.example.com:7071"
             capacity { cpu_millis: 4000 memory_bytes: 8589934592 ports: 100 } } })");
    apply(R"(jobs_submitted { jobs { name: "web" user: "alice" priority: 100 task_count: 2
             task { command: "/bin/true" port_names: "http"
                    resources { cpu_millis: 100 memory_bytes: 1048576 ports: 1 } } } })");
    apply(R"(jobs_submitted { jobs { name: "v2.api" user: "alice" priority: 100 task_count: 1
             task { command: "/bin/true" resources { cpu_millis: 100 memory_bytes: 1048576 } } } })");
    apply(R"(task_scheduled { job: "alice/web" index: 0 machine: "m1" })");
    apply(R"(task_scheduled { job: "alice/v2.api" index: 0 machine: "m2" })");
    apply(R"(task_observed { task { job: "alice/web" index: 0 incarnation: 1 } phase: ACTIVE
             ports { key: "http" value: 31000 } })");
    return s;
  }();
  return *cell;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  if (size > herd::dns::kTcpPayload) return 0;
  absl::string_view packet = herd::fuzz::AsText(data, size);
  const herd::dns::ParseResult parsed = herd::dns::ParseQuery(packet);
  auto answer = [](const herd::dns::Question& q) { return herd::master::AnswerDns(Cell(), q, "herd", 42); };
  for (bool tcp : {false, true}) {
    std::string out = herd::dns::Respond(packet, tcp, answer);
    HERD_FUZZ_ASSERT(out.empty() == (parsed.kind == herd::dns::ParseResult::kIgnore), "answered what it should drop");
    if (out.empty()) continue;
    const size_t limit = tcp ? herd::dns::kTcpPayload : herd::dns::UdpLimit(parsed.query);
    HERD_FUZZ_ASSERT(out.size() >= 12 && out.size() <= limit, std::to_string(out.size()));
    HERD_FUZZ_ASSERT((static_cast<uint8_t>(out[2]) & 0x80) != 0, "not a response");
    HERD_FUZZ_ASSERT(out.substr(0, 2) == packet.substr(0, 2), "another id");
    // The answer parses as a message would: its own question reads back.
    if (parsed.kind == herd::dns::ParseResult::kQuery) {
      std::string again = out;
      again[2] = static_cast<char>(static_cast<uint8_t>(again[2]) & 0x7F);
      again[6] = again[7] = again[8] = again[9] = again[10] = again[11] = 0;
      const size_t qlen = 12 + parsed.query.question.wire.size() + 4;
      herd::dns::ParseResult back = herd::dns::ParseQuery(absl::string_view(again).substr(0, qlen));
      HERD_FUZZ_ASSERT(
          back.kind == herd::dns::ParseResult::kQuery && back.query.question.name == parsed.query.question.name,
          parsed.query.question.name);
    }
  }
  return 0;
}
