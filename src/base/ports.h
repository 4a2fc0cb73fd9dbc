// A TCP port nobody listens on now, the kernel's pick (bind to port 0, read
// it back, close). Another process may take it before the caller binds it:
// for tests, benchmarks and `herd up`, which start their own servers on
// loopback and check that they came up.
#pragma once

#include <string>

namespace herd {

// 0 if `host` (an IPv4 address) cannot be bound.
int FreePort(const std::string& host = "127.0.0.1");

}  // namespace herd
