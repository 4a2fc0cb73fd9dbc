#include "master/core/naming/dns_wire.h"

#include <random>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace herd::dns {
namespace {

// A query as a stub resolver writes it; edns_payload 0: no OPT record.
std::string MakeQuery(const std::string& name, uint16_t type, uint16_t id = 0x1234, uint16_t edns_payload = 0,
                      uint8_t edns_version = 0) {
  std::string q;
  auto u16 = [&](uint16_t v) {
    q.push_back(static_cast<char>(v >> 8));
    q.push_back(static_cast<char>(v & 0xFF));
  };
  u16(id);
  u16(0x0100);  // RD
  u16(1);
  u16(0);
  u16(0);
  u16(edns_payload ? 1 : 0);
  for (absl::string_view label : absl::StrSplit(name, '.', absl::SkipEmpty())) {
    q.push_back(static_cast<char>(label.size()));
    q.append(label.data(), label.size());
  }
  q.push_back('\0');
  u16(type);
  u16(kClassIn);
  if (edns_payload) {
    q.push_back('\0');
    u16(kTypeOpt);
    u16(edns_payload);
    q.push_back('\0');
    q.push_back(static_cast<char>(edns_version));
    u16(0);
    u16(0);
  }
  return q;
}

uint16_t At16(const std::string& p, size_t i) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[i]) << 8 | static_cast<uint8_t>(p[i + 1]));
}

struct Header {
  uint16_t id, flags, qd, an, ns, ar;
  int rcode() const { return flags & 0xF; }
  bool tc() const { return (flags & 0x0200) != 0; }
  bool aa() const { return (flags & 0x0400) != 0; }
  bool qr() const { return (flags & 0x8000) != 0; }
};
Header HeaderOf(const std::string& p) {
  EXPECT_GE(p.size(), 12u);
  return {At16(p, 0), At16(p, 2), At16(p, 4), At16(p, 6), At16(p, 8), At16(p, 10)};
}

Response ManyAddresses(int n) {
  Response r;
  for (int i = 0; i < n; ++i) {
    r.answer.push_back({"web.alice.local.herd", kTypeA, 5, RdataA("10.0." + std::to_string(i / 250) + "." +
                                                                     std::to_string(i % 250 + 1))});
  }
  return r;
}

TEST(DnsWire, ParsesAQueryLowercasedAndKeepsTheWireNameAsItCame) {
  ParseResult p = ParseQuery(MakeQuery("0.HeLLo.alice.local.herd", kTypeA, 77));
  ASSERT_EQ(p.kind, ParseResult::kQuery);
  EXPECT_EQ(p.query.id, 77);
  EXPECT_TRUE(p.query.recursion_desired);
  EXPECT_EQ(p.query.question.name, "0.hello.alice.local.herd");
  EXPECT_EQ(p.query.question.type, kTypeA);
  EXPECT_FALSE(p.query.edns);
  // The answer echoes the question's case (resolvers using 0x20 check it).
  std::string out = Respond(MakeQuery("0.HeLLo.alice.local.herd", kTypeA, 77), false,
                            [](const Question&) { return Response(); });
  EXPECT_NE(out.find("HeLLo"), std::string::npos);
  Header h = HeaderOf(out);
  EXPECT_EQ(h.id, 77);
  EXPECT_TRUE(h.qr());
  EXPECT_TRUE(h.aa());
  EXPECT_EQ(h.qd, 1);
  EXPECT_EQ(h.an, 0);
}

TEST(DnsWire, EncodesAnswersWithTheirRdata) {
  Response r;
  r.answer.push_back({"0.web.alice.local.herd", kTypeA, 5, RdataA("10.1.2.3")});
  std::string out = Respond(MakeQuery("0.web.alice.local.herd", kTypeA), false, [&](const Question&) { return r; });
  Header h = HeaderOf(out);
  EXPECT_EQ(h.an, 1);
  EXPECT_EQ(h.rcode(), kNoError);
  EXPECT_EQ(out.substr(out.size() - 4), std::string("\x0a\x01\x02\x03", 4));
  EXPECT_EQ(RdataA("not-an-ip"), "");
  EXPECT_EQ(RdataAaaa("::1").size(), 16u);
  EXPECT_EQ(RdataSrv(0, 1, 8080, "0.web.alice.local.herd").substr(0, 6), std::string("\0\0\0\1\x1f\x90", 6));
  EXPECT_EQ(RdataName(std::string(64, 'a')), "");  // a label over 63
  EXPECT_EQ(RdataName(""), std::string("\0", 1));   // the root
}

TEST(DnsWire, MalformedPacketsGetFormErrOrNothing) {
  auto answer = [](const Question&) { return ManyAddresses(1); };
  EXPECT_EQ(Respond("", false, answer), "");
  EXPECT_EQ(Respond(std::string(11, '\0'), false, answer), "");  // shorter than a header
  std::string response = MakeQuery("a.herd", kTypeA);
  response[2] |= static_cast<char>(0x80);  // QR: a response, never answered
  EXPECT_EQ(Respond(response, false, answer), "");

  auto formerr = [&](const std::string& packet) {
    std::string out = Respond(packet, false, answer);
    EXPECT_EQ(HeaderOf(out).rcode(), kFormErr);
    EXPECT_EQ(HeaderOf(out).an, 0);
    EXPECT_EQ(HeaderOf(out).qd, 0);
  };
  std::string two = MakeQuery("a.herd", kTypeA);
  two[5] = 2;  // QDCOUNT 2
  formerr(two);
  std::string cut = MakeQuery("abc.herd", kTypeA);
  formerr(cut.substr(0, 15));  // the name stops inside a label
  std::string pointer = MakeQuery("a.herd", kTypeA);
  pointer[12] = static_cast<char>(0xC0);  // a compression pointer
  pointer[13] = 12;
  formerr(pointer);
  std::string longname;
  for (int i = 0; i < 5; ++i) longname += std::string(60, 'a') + ".";
  formerr(MakeQuery(longname, kTypeA));  // over 255 bytes
  formerr(MakeQuery("a.herd", kTypeA) + "junk");  // trailing bytes
  std::string opt = MakeQuery("a.herd", kTypeA, 1, 1232);
  opt[opt.size() - 11] = 1;  // the OPT record's name is not the root
  formerr(opt);

  std::string notify = MakeQuery("a.herd", kTypeSoa);
  notify[2] = static_cast<char>(4 << 3);  // opcode NOTIFY
  EXPECT_EQ(HeaderOf(Respond(notify, false, answer)).rcode(), kNotImp);
}

TEST(DnsWire, OddBytesInALabelCannotPassForADot) {
  std::string q = MakeQuery("x.herd", kTypeA);
  q[13] = '.';  // the label "x" becomes "."
  ParseResult p = ParseQuery(q);
  ASSERT_EQ(p.kind, ParseResult::kQuery);
  EXPECT_EQ(p.query.question.name, "\\046.herd");
}

TEST(DnsWire, UdpTruncatesToWhatTheClientTakesAndTcpCarriesAll) {
  auto many = [](const Question&) { return ManyAddresses(100); };  // 100 * 36 bytes
  std::string udp = Respond(MakeQuery("web.alice.local.herd", kTypeA), false, many);
  EXPECT_LE(udp.size(), kUdpPayload);
  EXPECT_TRUE(HeaderOf(udp).tc());
  EXPECT_LT(HeaderOf(udp).an, 100);

  std::string edns = Respond(MakeQuery("web.alice.local.herd", kTypeA, 1, 4096), false, many);
  EXPECT_LE(edns.size(), kEdnsPayload);  // capped at 1232 whatever the client offers
  EXPECT_GT(edns.size(), kUdpPayload);
  EXPECT_TRUE(HeaderOf(edns).tc());
  EXPECT_EQ(HeaderOf(edns).ar, 1);  // the OPT record

  std::string tcp = Respond(MakeQuery("web.alice.local.herd", kTypeA), true, many);
  EXPECT_FALSE(HeaderOf(tcp).tc());
  EXPECT_EQ(HeaderOf(tcp).an, 100);

  // Additional records that do not fit are dropped without TC.
  Response extra = ManyAddresses(1);
  extra.additional = ManyAddresses(100).answer;
  std::string out = Respond(MakeQuery("web.alice.local.herd", kTypeA), false, [&](const Question&) { return extra; });
  EXPECT_FALSE(HeaderOf(out).tc());
  EXPECT_EQ(HeaderOf(out).an, 1);
  EXPECT_LE(out.size(), kUdpPayload);
}

TEST(DnsWire, AnUnknownEdnsVersionIsBadVers) {
  std::string out = Respond(MakeQuery("a.herd", kTypeA, 1, 1232, 1), false, [](const Question&) { return Response(); });
  // The OPT record closes the message: its TTL's top byte is the upper
  // bits of the rcode (16 >> 4 = 1).
  ASSERT_GE(out.size(), 11u);
  EXPECT_EQ(static_cast<uint8_t>(out[out.size() - 6]), 1);
  EXPECT_EQ(HeaderOf(out).rcode(), 0);
}

// Random packets and random damage to good ones: every answer is a valid
// header or nothing, and nothing reads outside the packet (ASan in the
// fuzzer, dns_query_fuzzer, checks that part harder).
TEST(DnsWire, SurvivesRandomInput) {
  std::mt19937 rng(42);
  auto answer = [](const Question&) { return ManyAddresses(3); };
  const std::string good = MakeQuery("0.web.alice.local.herd", kTypeA, 9, 1232);
  for (int i = 0; i < 20000; ++i) {
    std::string p = good;
    if (i % 2 == 0) {
      p.resize(rng() % 80);
      for (char& c : p) c = static_cast<char>(rng());
    } else {
      for (int k = 0; k < 3; ++k) p[rng() % p.size()] = static_cast<char>(rng());
      p.resize(rng() % (p.size() + 1));
    }
    for (bool tcp : {false, true}) {
      std::string out = Respond(p, tcp, answer);
      if (out.empty()) continue;
      EXPECT_GE(out.size(), 12u);
      EXPECT_LE(out.size(), tcp ? kTcpPayload : kEdnsPayload);
      EXPECT_TRUE(HeaderOf(out).qr());
    }
  }
}

}  // namespace
}  // namespace herd::dns
