// gRPC plumbing shared by the servers and the CLI: status mapping (absl and
// gRPC codes are the same set), mutually authenticated TLS channels and
// servers, and the caller's identity.
//
// Every connection in a cell is TLS with certificates on both sides, all
// signed by the cell's CA (pki/). A client names the identity it expects
// the server to have (the master, or machine M) and the handshake fails
// unless the server holds that certificate; a server takes the caller's
// identity from the certificate the handshake verified, never from a
// request field.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pki/pki.h"

namespace herd::rpc {

// Metadata key naming the user a caller acts on behalf of (needs the run-as
// capability unless it is the caller itself).
inline constexpr char kActingAsKey[] = "herd-acting-as";

// The largest request a server accepts and the largest reply a client
// accepts (a checkpoint export streams in records well under this).
inline constexpr int kMaxRequestBytes = 16 << 20;
inline constexpr int kMaxResponseBytes = 256 << 20;
// Requests a server handles at once (streams included).
inline constexpr int kMaxServerThreads = 512;

// Sends gRPC's own log lines (failed handshakes and the like) to Herd's log
// at info level: a server's log keeps them, the CLI (which logs warnings
// only) keeps its one-line errors clean. Call before any gRPC use.
// HERD_GRPC_LOG=stderr leaves gRPC's own logging alone (with GRPC_VERBOSITY
// and GRPC_TRACE, for debugging).
void RouteGrpcLogs();

grpc::Status ToGrpc(const absl::Status& st);
absl::Status FromGrpc(const grpc::Status& st);

// The identity a server at some address must prove: the master, or machine
// NAME.
pki::Subject MasterIdentity();
pki::Subject MachineIdentity(absl::string_view name);

// A TLS channel to HOST:PORT presenting `self`, which succeeds only if the
// server holds a certificate for `server` signed by self's CA.
// With `idle_timeout_ms` > 0 the connection closes after that long without
// a call (and opens again on the next): for clients that call rarely and of
// which there are many (hollow agents ringing the master).
//
// `address` may list several masters, "HOST:PORT,HOST:PORT,..." (each HOST
// an IP address): the channel connects to all of them and sends each call
// to one it is connected to (round robin), so an unreachable master costs
// nothing; any replica serves (a follower answers reads itself, as of the
// log's head, and forwards changes to the leader).
std::shared_ptr<grpc::Channel> Channel(const std::string& address, const pki::Credential& self,
                                       const pki::Subject& server, int64_t idle_timeout_ms = 0);

// The gRPC target for `address` (one HOST:PORT, or a list as above);
// INVALID_ARGUMENT naming the entry if a list holds something other than
// IP:PORT (several masters behind one DNS name need no list: give the name).
absl::StatusOr<std::string> Target(const std::string& address);

// The TLS credentials presenting `self` (one object per identity).
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const pki::Credential& self);

// A client context with a deadline (0: none) and, if not empty, the user
// the call acts on behalf of.
std::unique_ptr<grpc::ClientContext> Context(absl::string_view acting_as, int64_t timeout_ms);

// Who a server-side call came from: the certificate its TLS handshake
// verified (UNAUTHENTICATED if there is none, which a server started by
// StartServer never lets through).
absl::StatusOr<pki::CertInfo> Caller(const grpc::ServerContextBase* ctx);
// The user the call acts on behalf of ("" if it did not say).
std::string ActingAs(const grpc::ServerContextBase* ctx);

// A follower master forwards a change it may not make to the leader, on
// behalf of its caller: the caller's certificate (PEM) goes in this
// metadata key, and the leader believes it only from a master, and only
// once it verifies it against the cell's CA itself.
inline constexpr char kForwardedForKey[] = "herd-forwarded-for-bin";
// The cell revision a reply was made at (trailing metadata of every
// answer), so a client (or a follower forwarding a change) can wait until
// a replica it reads from has caught up with it: read-your-writes.
inline constexpr char kRevisionKey[] = "herd-revision";
// "leader" or "follower": who answered.
inline constexpr char kRoleKey[] = "herd-role";

// The caller's own certificate, PEM (as the TLS handshake verified it).
absl::StatusOr<std::string> CallerPem(const grpc::ServerContextBase* ctx);
// Who the call was forwarded for: NOT_FOUND if it was not forwarded;
// PERMISSION_DENIED if the sender is not a master; UNAUTHENTICATED if the
// forwarded certificate is not valid and signed by `ca_pem` at now_s.
absl::StatusOr<pki::CertInfo> ForwardedFor(const grpc::ServerContextBase* ctx, const pki::CertInfo& sender,
                                           const std::string& ca_pem, int64_t now_s);

// Parses "HOST:PORT"; INVALID_ARGUMENT with a clear message otherwise.
absl::Status ValidateAddress(absl::string_view address);

// Starts a TLS server on `address` (port 0 = pick one) with `services`,
// presenting `self` and requiring every client to present a certificate
// signed by self's CA; returns it and sets *bound to "HOST:PORT" actually
// bound. UNAVAILABLE if the address cannot be bound (e.g. in use).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& address,
                                                          std::vector<grpc::Service*> services,
                                                          const pki::Credential& self, std::string* bound);

// One TLS port presenting several identities (all of one CA): the handshake
// presents the one whose server name the client asks for (SNI, which Channel
// sets to the name of the identity it expects). Hollow agents serve
// thousands of machines' identities from a few ports this way.
struct Listener {
  std::string address;  // HOST:PORT, port 0 = pick one
  std::vector<pki::Credential> identities;
  // Accept callers without a client certificate (one presented is still
  // verified). Only the master's port does, for machines joining with a
  // token (herd agent --join); every method but those refuses a caller
  // without a certificate (Caller()).
  bool client_cert_optional = false;
};
// Starts one server on every listener; *bound receives each listener's
// HOST:PORT, in order.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::vector<Listener>& listeners,
                                                          std::vector<grpc::Service*> services,
                                                          std::vector<std::string>* bound);

}  // namespace herd::rpc
