// `herd master`: the master process -- SQLite store in a data directory, the
// MasterCore, and its gRPC server.
#pragma once

#include <string>

#include "master/core/master_core.h"
#include "master/history/history_db.h"

namespace herd::master {

struct ServerOptions {
  std::string data_dir;
  std::string listen = "127.0.0.1:7070";
  MasterOptions core;
  std::string log_file;  // also log here (besides stderr)
  // The master's credential (role master); default DATA/credentials.pem.
  std::string credentials;
  // The cell CA's directory (ca.crt, ca.key), if this master issues user
  // credentials (herd user add). Optional.
  std::string ca_dir;
  // Requests a second each user may send (a burst of twice that); 0: no
  // limit.
  double user_rate = 200;
  // Open streaming calls (watch, watch-names, checkpoint export, framework
  // subscriptions) each user may hold, and the cell may hold in all: each
  // holds a server thread, and the cell-wide cap stays well below the
  // server's threads so other calls always find one (#33). 0: no cap.
  int max_streams_per_user = 8;
  int max_streams = 1024;
  // Unary requests each user may have in flight at once (a thread each
  // while served), so one user's slow calls cannot hold the threads the
  // others need (#33). 0: no cap.
  int max_requests_per_user = 64;
  // Where the state lives: "" = SQLite in data_dir (one master); or
  // "etcd://HOST:PORT,HOST:PORT/PREFIX" = replicated masters sharing an etcd
  // cluster: this one follows (hot) until it wins the leader lease, then
  // serves on `listen`, which must then name a port (it is what the others
  // and `herd cell` report as the leader).
  std::string store;
  // The leader lease's TTL (etcd's minimum is 2 s by default).
  int64_t lease_ttl_s = 2;
  // TLS to etcd: a credential file (certificate, key, and the CA that signed
  // the members' certificates) issued by the etcd cluster's CA, which must
  // not be the cell's CA (whose users must not reach etcd). "": plaintext.
  std::string etcd_credentials;
  // "HOST:PORT": serve /metrics over HTTPS there (https/https_server.h), to a
  // scraper with a user's credential (action read-metrics) or the bearer
  // token in metrics_token_file. "": no metrics endpoint.
  std::string metrics;
  std::string metrics_token_file;
  // The history database (docs/history.md): "" = DATA/history.db, "none" =
  // keep no history. history.path is set from it.
  std::string history;
  history::Options history_options;
  // Alarm rules (docs/alerts.md): a YAML file; "" = the built-in rules,
  // with no sinks (herd alerts lists them).
  std::string alerts;
  // "HOST:PORT": answer DNS for tasks' names there, over UDP and TCP
  // (dns_server.h; the domain is core.dns_domain). "": no DNS.
  std::string dns;
};

// Runs until SIGINT/SIGTERM; returns the process exit code.
int RunMaster(const ServerOptions& options);

}  // namespace herd::master
