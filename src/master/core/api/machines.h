// The master's cell API: machines registering and listed, quota set and
// listed, and the cell in brief. Every call asks the Authorizer first.
#pragma once

#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"

namespace herd::master {

class MachinesApi {
 public:
  explicit MachinesApi(const ApiContext& ctx) : ctx_(ctx) {}

  // An agent (re-)registering its machine: address, capacity, attributes. A
  // repeat with nothing changed changes nothing; the machine is polled at
  // once.
  absl::StatusOr<v1::RegisterMachineResponse> RegisterMachine(const Principal& who,
                                                              const v1::RegisterMachineRequest& req);
  // A machine's doorbell: poll it now (NOT_FOUND if it is not registered).
  absl::StatusOr<v1::MachineChangedResponse> MachineChanged(const Principal& who,
                                                            const v1::MachineChangedRequest& req);
  absl::StatusOr<v1::ListMachinesResponse> ListMachines(const Principal& who, const v1::ListMachinesRequest& req);
  absl::StatusOr<v1::SetQuotaResponse> SetQuota(const Principal& who, const v1::SetQuotaRequest& req);
  // herd drain / undrain: admins only.
  absl::StatusOr<v1::DrainMachinesResponse> DrainMachines(const Principal& who, const v1::DrainMachinesRequest& req);
  // Every quota with its usage, and users with live work but no quota in a
  // band (unlimited there).
  absl::StatusOr<v1::ListQuotasResponse> ListQuotas(const Principal& who, const v1::ListQuotasRequest& req);
  absl::StatusOr<v1::CellInfo> GetCell(const Principal& who);

 private:
  const ApiContext& ctx_;
};

}  // namespace herd::master
