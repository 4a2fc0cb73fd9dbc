// The DNS wire format (RFC 1035, EDNS0 of RFC 6891), as much of it as an
// authoritative responder for tasks' names needs: read one query, write one
// response. Input is hostile: every length is checked against the packet,
// names are bounded (63 bytes a label, 255 a name) and compression pointers,
// which a query has no use for, are refused (FORMERR) rather than followed.
// Pure: no sockets (master/server/dns_server does the I/O).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace herd::dns {

enum Type : uint16_t {
  kTypeA = 1,
  kTypeNs = 2,
  kTypeCname = 5,
  kTypeSoa = 6,
  kTypeAaaa = 28,
  kTypeSrv = 33,
  kTypeOpt = 41,
  kTypeAny = 255,
};
inline constexpr uint16_t kClassIn = 1;
inline constexpr uint16_t kClassAny = 255;

enum Rcode : uint16_t {  // 12 bits with EDNS: the upper 8 in the OPT record
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
  kBadVers = 16,
};

// A UDP answer without EDNS fits in 512 bytes; with EDNS, in what the
// client offers, at most kEdnsPayload (the DNS flag day 2020 size, which
// avoids IP fragmentation). A TCP message is at most 65535 bytes.
inline constexpr size_t kUdpPayload = 512;
inline constexpr size_t kEdnsPayload = 1232;
inline constexpr size_t kTcpPayload = 65535;
inline constexpr size_t kMaxName = 255;
inline constexpr size_t kMaxLabel = 63;

struct Question {
  // Lowercase, dot-separated, no trailing dot ("" is the root). A label
  // holding a '.', a '\' or a byte outside printable ASCII is written as
  // \DDD, so it cannot be mistaken for two labels.
  std::string name;
  std::string wire;  // the name exactly as it came (echoed back: resolvers check its case)
  uint16_t type = 0;
  uint16_t klass = 0;
};

struct Query {
  uint16_t id = 0;
  bool recursion_desired = false;
  bool has_question = false;
  Question question;
  bool edns = false;
  uint16_t edns_payload = 0;  // the size the client accepts (with edns)
  uint8_t edns_version = 0;
};

struct ParseResult {
  enum Kind {
    kQuery,    // a query to answer
    kFormErr,  // answer FORMERR (the id and flags were read)
    kNotImp,   // an opcode other than QUERY: answer NOTIMP
    kIgnore,   // not a query (too short, or a response): drop it
  };
  Kind kind = kIgnore;
  Query query;
};
ParseResult ParseQuery(absl::string_view packet);

// One resource record; rdata is already in wire form (the Rdata* helpers).
struct Record {
  std::string name;
  uint16_t type = 0;
  uint32_t ttl = 0;
  std::string rdata;
};

struct Response {
  uint16_t rcode = kNoError;
  bool authoritative = true;
  std::vector<Record> answer;
  std::vector<Record> authority;
  std::vector<Record> additional;
};

// The largest response `query` accepts over UDP.
size_t UdpLimit(const Query& query);

// Encodes the response to `query` in at most `max_size` bytes (at least
// 512). Records that do not fit are left out: additional ones silently,
// answer or authority ones with the TC bit set, so a UDP client asks again
// over TCP. An OPT record answers one that came with EDNS.
std::string EncodeResponse(const Query& query, const Response& response, size_t max_size);

// The response to one query packet ("" to send nothing, as for a packet
// that is not a query): FORMERR for a malformed query, NOTIMP for an opcode
// other than QUERY, else `answer`'s, within 65535 bytes over TCP and
// UdpLimit over UDP.
using AnswerFn = std::function<Response(const Question&)>;
std::string Respond(absl::string_view packet, bool tcp, const AnswerFn& answer);

// Rdata in wire form. Names are written uncompressed; false if one is not
// a valid name (a label over 63 bytes, an empty label, over 255 in all).
bool EncodeName(absl::string_view name, std::string* out);
// "10.0.0.5" -> 4 bytes; "" if it is not an IPv4 address. Likewise IPv6.
std::string RdataA(absl::string_view ip);
std::string RdataAaaa(absl::string_view ip);
std::string RdataName(absl::string_view name);  // CNAME, NS; "" if invalid
std::string RdataSrv(uint16_t priority, uint16_t weight, uint16_t port, absl::string_view target);
std::string RdataSoa(absl::string_view mname, absl::string_view rname, uint32_t serial, uint32_t refresh,
                     uint32_t retry, uint32_t expire, uint32_t minimum);

}  // namespace herd::dns
