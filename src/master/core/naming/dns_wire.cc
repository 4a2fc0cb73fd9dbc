#include "master/core/naming/dns_wire.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace herd::dns {
namespace {

constexpr uint16_t kFlagQr = 0x8000;
constexpr uint16_t kFlagAa = 0x0400;
constexpr uint16_t kFlagTc = 0x0200;
constexpr uint16_t kFlagRd = 0x0100;
constexpr size_t kHeader = 12;
constexpr size_t kOptSize = 11;  // root name, type, class, ttl, rdlength 0

// Reads big-endian integers from a packet, failing (not reading past the
// end) once it runs out.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U8(uint8_t* v) {
    if (pos_ + 1 > data_.size()) return false;
    *v = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }
  bool U16(uint16_t* v) {
    uint8_t a, b;
    if (!U8(&a) || !U8(&b)) return false;
    *v = static_cast<uint16_t>(a << 8 | b);
    return true;
  }
  bool U32(uint32_t* v) {
    uint16_t a, b;
    if (!U16(&a) || !U16(&b)) return false;
    *v = static_cast<uint32_t>(a) << 16 | b;
    return true;
  }
  bool Skip(size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  // A name without compression (a query needs none). `text` gets the
  // lowercase presentation form, `wire` the bytes as they came.
  bool Name(std::string* text, std::string* wire) {
    const size_t start = pos_;
    text->clear();
    while (true) {
      uint8_t len;
      if (!U8(&len)) return false;
      if ((len & 0xC0) != 0) return false;  // a pointer or a reserved label type
      if (len == 0) break;
      if (pos_ - start + len + 1 > kMaxName) return false;  // with the root's zero still to come
      if (!text->empty()) text->push_back('.');
      if (len > data_.size() - pos_) return false;
      for (uint8_t i = 0; i < len; ++i) {
        const unsigned char c = static_cast<unsigned char>(data_[pos_++]);
        if (c == '.' || c == '\\' || c < 0x21 || c > 0x7e) {
          const char esc[] = {'\\', static_cast<char>('0' + c / 100), static_cast<char>('0' + c / 10 % 10),
                              static_cast<char>('0' + c % 10)};
          text->append(esc, sizeof(esc));
        } else {
          text->push_back(absl::ascii_tolower(c));
        }
      }
    }
    wire->assign(data_.data() + start, pos_ - start);
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  absl::string_view data_;
  size_t pos_ = 0;
};

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xFF));
}
void PutU32(std::string* out, uint32_t v) {
  PutU16(out, static_cast<uint16_t>(v >> 16));
  PutU16(out, static_cast<uint16_t>(v & 0xFFFF));
}
void SetU16(std::string* out, size_t at, uint16_t v) {
  (*out)[at] = static_cast<char>(v >> 8);
  (*out)[at + 1] = static_cast<char>(v & 0xFF);
}

}  // namespace

ParseResult ParseQuery(absl::string_view packet) {
  ParseResult r;
  Reader in(packet);
  uint16_t flags, qd, an, ns, ar;
  if (!in.U16(&r.query.id) || !in.U16(&flags) || !in.U16(&qd) || !in.U16(&an) || !in.U16(&ns) || !in.U16(&ar)) {
    return r;  // shorter than a header: nobody to answer
  }
  if (flags & kFlagQr) return r;  // a response: never answer one (no loops)
  r.query.recursion_desired = (flags & kFlagRd) != 0;
  if (((flags >> 11) & 0xF) != 0) {
    r.kind = ParseResult::kNotImp;
    return r;
  }
  r.kind = ParseResult::kFormErr;
  if (qd != 1 || an != 0 || ns != 0 || ar > 1) return r;
  Question& q = r.query.question;
  if (!in.Name(&q.name, &q.wire) || !in.U16(&q.type) || !in.U16(&q.klass)) return r;
  r.query.has_question = true;
  if (ar == 1) {
    std::string name, wire;
    uint16_t type, klass, rdlength;
    uint32_t ttl;
    if (!in.Name(&name, &wire) || !in.U16(&type) || !in.U16(&klass) || !in.U32(&ttl) || !in.U16(&rdlength) ||
        !in.Skip(rdlength)) {
      return r;
    }
    if (type != kTypeOpt || !name.empty()) return r;  // the only additional record a query may carry here
    r.query.edns = true;
    r.query.edns_payload = std::max<uint16_t>(klass, kUdpPayload);
    r.query.edns_version = static_cast<uint8_t>(ttl >> 16);
  }
  if (!in.AtEnd()) return r;
  r.kind = ParseResult::kQuery;
  return r;
}

size_t UdpLimit(const Query& query) {
  if (!query.edns) return kUdpPayload;
  return std::clamp<size_t>(query.edns_payload, kUdpPayload, kEdnsPayload);
}

bool EncodeName(absl::string_view name, std::string* out) {
  std::string w;
  if (!name.empty()) {
    for (absl::string_view label : absl::StrSplit(name, '.')) {
      if (label.empty() || label.size() > kMaxLabel) return false;
      w.push_back(static_cast<char>(label.size()));
      w.append(label.data(), label.size());
    }
  }
  w.push_back('\0');
  if (w.size() > kMaxName) return false;
  out->append(w);
  return true;
}

std::string RdataA(absl::string_view ip) {
  in_addr a;
  if (inet_pton(AF_INET, std::string(ip).c_str(), &a) != 1) return "";
  return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
}

std::string RdataAaaa(absl::string_view ip) {
  in6_addr a;
  if (inet_pton(AF_INET6, std::string(ip).c_str(), &a) != 1) return "";
  return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
}

std::string RdataName(absl::string_view name) {
  std::string out;
  return EncodeName(name, &out) ? out : "";
}

std::string RdataSrv(uint16_t priority, uint16_t weight, uint16_t port, absl::string_view target) {
  std::string out;
  PutU16(&out, priority);
  PutU16(&out, weight);
  PutU16(&out, port);
  return EncodeName(target, &out) ? out : "";
}

std::string RdataSoa(absl::string_view mname, absl::string_view rname, uint32_t serial, uint32_t refresh,
                     uint32_t retry, uint32_t expire, uint32_t minimum) {
  std::string out;
  if (!EncodeName(mname, &out) || !EncodeName(rname, &out)) return "";
  for (uint32_t v : {serial, refresh, retry, expire, minimum}) PutU32(&out, v);
  return out;
}

std::string EncodeResponse(const Query& query, const Response& response, size_t max_size) {
  max_size = std::clamp(max_size, kUdpPayload, kTcpPayload);
  std::string out(kHeader, '\0');
  SetU16(&out, 0, query.id);
  uint16_t qd = 0;
  if (query.has_question) {
    out.append(query.question.wire);
    PutU16(&out, query.question.type);
    PutU16(&out, query.question.klass);
    qd = 1;
  }
  const size_t reserve = query.edns ? kOptSize : 0;
  // 1: added; 0: left out (not encodable, or rdata over 65535); -1: no room.
  auto add = [&](const Record& rec) {
    std::string rr;
    if (rec.rdata.size() > 0xFFFF || !EncodeName(rec.name, &rr)) return 0;
    PutU16(&rr, rec.type);
    PutU16(&rr, kClassIn);
    PutU32(&rr, rec.ttl);
    PutU16(&rr, static_cast<uint16_t>(rec.rdata.size()));
    rr.append(rec.rdata);
    if (out.size() + rr.size() + reserve > max_size) return -1;
    out.append(rr);
    return 1;
  };
  bool truncated = false;
  uint16_t counts[3] = {0, 0, 0};
  const std::vector<Record>* sections[3] = {&response.answer, &response.authority, &response.additional};
  for (int s = 0; s < 3 && !truncated; ++s) {
    for (const Record& rec : *sections[s]) {
      const int added = add(rec);
      if (added < 0) {
        truncated = s < 2;  // additional records are optional: no TC for them
        break;
      }
      counts[s] += added;
    }
  }
  uint16_t rcode = response.rcode;
  if (query.edns && query.edns_version > 0) rcode = kBadVers;
  if (query.edns) {
    out.push_back('\0');
    PutU16(&out, kTypeOpt);
    PutU16(&out, static_cast<uint16_t>(kEdnsPayload));
    PutU32(&out, static_cast<uint32_t>(rcode >> 4) << 24);  // extended rcode; version 0; no flags
    PutU16(&out, 0);
    ++counts[2];
  }
  uint16_t flags = kFlagQr | (rcode & 0xF);
  if (response.authoritative) flags |= kFlagAa;
  if (truncated) flags |= kFlagTc;
  if (query.recursion_desired) flags |= kFlagRd;
  SetU16(&out, 2, flags);
  SetU16(&out, 4, qd);
  SetU16(&out, 6, counts[0]);
  SetU16(&out, 8, counts[1]);
  SetU16(&out, 10, counts[2]);
  return out;
}

std::string Respond(absl::string_view packet, bool tcp, const AnswerFn& answer) {
  ParseResult p = ParseQuery(packet);
  Response response;
  switch (p.kind) {
    case ParseResult::kIgnore:
      return "";
    case ParseResult::kFormErr:
    case ParseResult::kNotImp:
      response.rcode = p.kind == ParseResult::kFormErr ? kFormErr : kNotImp;
      response.authoritative = false;
      p.query.has_question = false;  // echo no part of what could not be read
      p.query.edns = false;
      break;
    case ParseResult::kQuery:
      response = answer(p.query.question);
      break;
  }
  return EncodeResponse(p.query, response, tcp ? kTcpPayload : UdpLimit(p.query));
}

}  // namespace herd::dns
