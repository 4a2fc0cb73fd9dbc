// The master's naming API (docs/naming.md): Resolve a task's or a job's
// name to where its tasks are, and WatchNames for every change of that.
// Reading names is every user's right, like reading a job's status; the
// Authorizer is asked all the same (action resolve-name, on the job).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"
#include "master/core/api/cursor.h"

namespace herd::master {

class NamesApi {
 public:
  explicit NamesApi(const ApiContext& ctx) : ctx_(ctx) {}

  absl::StatusOr<v1::ResolveResponse> Resolve(const Principal& who, const v1::ResolveRequest& req);
  // The name's records, then the records that change (address, ports,
  // health, state, readiness) as revisions become durable. The caller may
  // read the name (asked again at every change: NOT_FOUND ends nothing, the
  // job's records are then empty).
  absl::StatusOr<std::unique_ptr<Cursor<v1::WatchNamesResponse>>> OpenWatchNames(const Principal& who,
                                                                               const v1::WatchNamesRequest& req);
  // OpenWatchNames, sent to `send` until it returns false or `cancelled()`.
  absl::Status WatchNames(const Principal& who, const v1::WatchNamesRequest& req,
                          const std::function<bool(const v1::WatchNamesResponse&)>& send,
                          const std::function<bool()>& cancelled);

 private:
  // The name's records now (authorized); NOT_FOUND once the job is gone.
  absl::StatusOr<v1::ResolveResponse> Records(const Principal& who, const std::string& name);

  const ApiContext& ctx_;
};

}  // namespace herd::master
