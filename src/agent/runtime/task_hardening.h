// The least privilege a task starts with, applied by herd-shim's child as
// the very last step before exec (after namespaces, root, cgroups and the
// switch to the task's uid, which all need privileges the task must not
// have):
//
//   - no_new_privs: exec of a setuid or file-capability binary gains nothing
//     (and the seccomp filter may then be loaded without CAP_SYS_ADMIN);
//   - the capability bounding set emptied (a task run as root by an admin's
//     grant keeps the small set a container runtime gives root: chown,
//     dac_override, fowner, fsetid, kill, setgid, setuid, setpcap,
//     net_bind_service, sys_chroot, mknod, audit_write, setfcap);
//   - a seccomp filter in the spirit of Kubernetes' RuntimeDefault (Docker's
//     default profile): everything is allowed except the calls that reach
//     the host's kernel state -- mount and friends, new namespaces (unshare,
//     setns, clone with CLONE_NEW*), module loading, kexec, reboot, swap,
//     clock setting, keyrings, bpf, perf events, userfaultfd, io_uring,
//     process_vm_*, handle-based opens, quotactl and the like -- which fail
//     with EPERM (clone3 with ENOSYS, so libc falls back to clone, whose
//     flags the filter can see).
//
// `isolation: {seccomp: unconfined}` (which needs the run-as-root
// capability) skips the filter and keeps the bounding set; no_new_privs
// stays. Plain C++ with libseccomp (linked statically into herd-shim).
#pragma once

namespace herd::agent {

enum class SeccompMode { kRuntimeDefault, kUnconfined };

// Each returns 0, or the errno of the step that failed (the caller reports
// it and does not exec).
//
// While still root, before the switch to the task's uid (dropping from the
// bounding set needs CAP_SETPCAP). `root_task`: the task will run as uid 0.
int DropBoundingCapabilities(SeccompMode mode, bool root_task);
// Last, just before exec: no_new_privs and the filter.
int HardenBeforeExec(SeccompMode mode);

// The names the filter refuses (for docs and tests).
const char* const* RefusedSyscalls();

}  // namespace herd::agent
