#include "agent/runtime/task_hardening.h"

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace herd::agent {
namespace {

// What the default filter refuses with EPERM. Names the running kernel or
// libseccomp does not know are skipped (a call that does not exist cannot
// be made).
constexpr const char* kRefused[] = {
    // The host's file system tree and the task's view of it.
    "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr",
    // New namespaces, or someone else's.
    "unshare", "setns",
    // Kernel modules, kexec, reboot, swap, the clock, accounting.
    "init_module", "finit_module", "delete_module", "create_module", "query_module", "get_kernel_syms",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "settimeofday", "stime", "clock_settime",
    "clock_adjtime", "adjtimex", "acct", "syslog", "sysfs", "_sysctl", "uselib", "ustat", "vhangup", "nfsservctl",
    "quotactl", "quotactl_fd", "lookup_dcookie",
    // Kernel state shared by every task: keyrings, bpf, perf, io_uring.
    "add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "fanotify_init",
    // Other processes' memory and files by handle.
    "process_vm_readv", "process_vm_writev", "kcmp", "name_to_handle_at", "open_by_handle_at", "pidfd_getfd",
    // Hardware and ancient interfaces.
    "iopl", "ioperm", "vm86", "vm86old",
    nullptr,
};

// CLONE_NEW* flags: clone with any of them is a new namespace.
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                                             CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, 0x00000080 /* NEWTIME */};

// What root keeps when an admin let a task run as root (a container
// runtime's default set).
constexpr int kRootKeeps[] = {CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,           CAP_FSETID,     CAP_KILL,
                              CAP_SETGID, CAP_SETUID,       CAP_SETPCAP,          CAP_NET_BIND_SERVICE,
                              CAP_SYS_CHROOT, CAP_MKNOD,    CAP_AUDIT_WRITE,      CAP_SETFCAP};

int LastCap() {
  int last = CAP_LAST_CAP;
  if (FILE* f = fopen("/proc/sys/kernel/cap_last_cap", "re")) {
    if (fscanf(f, "%d", &last) != 1) last = CAP_LAST_CAP;
    fclose(f);
  }
  return last;
}

int DropBoundingSet(bool root_task) {
  for (int cap = 0; cap <= LastCap(); ++cap) {
    bool keep = false;
    if (root_task) {
      for (int k : kRootKeeps) keep = keep || k == cap;
    }
    if (!keep && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  }
  return 0;
}

int LoadFilter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return ENOMEM;
  int rc = 0;
  for (const char* const* name = kRefused; *name != nullptr && rc == 0; ++name) {
    int nr = seccomp_syscall_resolve_name(*name);
    if (nr == __NR_SCMP_ERROR) continue;
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  // clone with a namespace flag; clone3 passes its flags in memory the
  // filter cannot read, so it is "not implemented" and libc uses clone.
  for (unsigned long flag : kNamespaceFlags) {
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  if (rc == 0) {
    int nr = seccomp_syscall_resolve_name("clone3");
    if (nr != __NR_SCMP_ERROR) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
  }
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  return rc < 0 ? -rc : rc;
}

}  // namespace

int DropBoundingCapabilities(SeccompMode mode, bool root_task) {
  if (mode == SeccompMode::kUnconfined) return 0;
  int err = DropBoundingSet(root_task);
  // A shim that is not root has no CAP_SETPCAP, and nothing to drop either.
  return err == EPERM && geteuid() != 0 ? 0 : err;
}

int HardenBeforeExec(SeccompMode mode) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return errno;
  if (mode == SeccompMode::kUnconfined) return 0;
  return LoadFilter();
}

const char* const* RefusedSyscalls() { return kRefused; }

}  // namespace herd::agent
