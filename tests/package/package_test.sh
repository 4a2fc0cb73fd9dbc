#!/usr/bin/env bash
# Issue #35 item 2: the Debian package, for real. Builds it from build/
# (scripts/package.sh --check: lintian and systemd-analyze verify clean),
# installs it with dpkg -i, starts a master and an agent with exactly the
# command lines of their units (the master as the package's system user, as
# User= says), lets the agent join with a token, runs a job, then removes
# the package (binaries gone, the cell's state and tasks' data kept, as
# Debian policy says for remove) and purges it (state gone). Needs root;
# cleans up after itself also when it fails. Listens on loopback only.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
[ "$(id -u)" -eq 0 ] || { echo "package_test: needs root (dpkg -i)"; exit 77; }
start=$(date +%s%N)
tmp=$(mktemp -d /tmp/herd-package-test-XXXXXX)
port=$((17300 + RANDOM % 500))
pids=()
say() { echo "package_test: $*"; }
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

# Every process whose working directory is under the agent's root (its
# tasks), until none is left (bounded).
kill_tasks() {
  local left
  for _ in $(seq 1 100); do
    left=0
    for p in /proc/[0-9]*; do
      case "$(readlink "$p/cwd" 2>/dev/null)" in /var/lib/herd/agent*) kill -9 "${p#/proc/}" 2>/dev/null; left=1 ;; esac
    done
    [ $left -eq 0 ] && return 0
    sleep 0.05
  done
}

cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  # Tasks outlive their agent (KillMode=process): every process under the
  # agent's root goes, then the agent's cgroups (only Herd's own).
  kill_tasks
  for g in /sys/fs/cgroup/*/herd/"$(hostname)"-* /sys/fs/cgroup/unified/herd/"$(hostname)"-*; do
    [ -d "$g" ] && find "$g" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  dpkg --purge herd >/dev/null 2>&1
  rm -rf /etc/herd "$tmp"
}
trap cleanup EXIT

if dpkg -s herd >/dev/null 2>&1; then fail "a herd package is installed already: remove it first (dpkg --purge herd)"; fi

# 1. Build the package; lintian and the units' verification must be clean.
HERD_NO_LINK=1 BUILD_DIR="$build" "$src/scripts/package.sh" --check > "$tmp/package.log" 2>&1 ||
  { cat "$tmp/package.log"; fail "scripts/package.sh --check"; }
deb=$(ls "$build"/package/herd_*_amd64.deb)
say "built $(basename "$deb"); lintian and systemd-analyze verify clean"

# 2. Install.
dpkg -i "$deb" > "$tmp/dpkg-i.log" 2>&1 || { cat "$tmp/dpkg-i.log"; fail "dpkg -i"; }
[ -x /usr/bin/herd ] && [ -x /usr/bin/herd-shim ] || fail "binaries not installed"
for u in herd-master herd-agent herd-scheduler; do [ -f "/lib/systemd/system/$u.service" ] || fail "no $u.service"; done
getent passwd herd >/dev/null || fail "no system user herd"
[ "$(stat -c %U:%a /var/lib/herd/master)" = "herd:700" ] || fail "/var/lib/herd/master is $(stat -c %U:%a /var/lib/herd/master)"
grep -q '^KillMode=process' /lib/systemd/system/herd-agent.service || fail "agent unit: KillMode"
grep -q '^Delegate=yes' /lib/systemd/system/herd-agent.service || fail "agent unit: Delegate"
say "installed"

# The operator's part: a CA the master may sign with, the master's
# credential, and the configuration (loopback, a free port).
/usr/bin/herd ca init --ca /etc/herd/ca --cell pkgtest > /dev/null
/usr/bin/herd ca issue --ca /etc/herd/ca --master --out /var/lib/herd/master/credentials.pem > /dev/null
/usr/bin/herd ca issue --ca /etc/herd/ca --user root --admin --out "$tmp/admin.pem" > /dev/null
chown -R herd:herd /etc/herd/ca /var/lib/herd/master
sed -i "s/^listen: .*/listen: 127.0.0.1:$port/" /etc/herd/master.yaml
sed -i -e "s/^master: .*/master: 127.0.0.1:$port/" -e "s/^listen: .*/listen: 127.0.0.1:0/" /etc/herd/agent.yaml

exec_start() {  # UNIT: its ExecStart= line
  sed -n 's/^ExecStart=//p' "/lib/systemd/system/$1.service"
}
unit_user() { sed -n 's/^User=//p' "/lib/systemd/system/$1.service"; }

# 3. The master, as its unit runs it.
cmd=$(exec_start herd-master)
[ "$(unit_user herd-master)" = herd ] || fail "the master's unit does not run as herd"
setpriv --reuid=herd --regid=herd --init-groups -- $cmd > "$tmp/master.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [ -s /var/lib/herd/master/master.addr ] && break; sleep 0.1; done
[ -s /var/lib/herd/master/master.addr ] || { cat "$tmp/master.log"; fail "the master did not start"; }
herd() { /usr/bin/herd --master "127.0.0.1:$port" --credentials "$tmp/admin.pem" "$@"; }
herd cell > /dev/null || { cat "$tmp/master.log"; fail "the master does not answer"; }
say "master up: $cmd (as user herd)"

# 4. The agent joins with a token, as its unit runs it.
herd token create --ttl 10m --uses 1 --json > "$tmp/token.json"
token=$(jq -r .token "$tmp/token.json")
hash=$(jq -r .caHash "$tmp/token.json")
install -m 0600 /dev/null /etc/herd/join-token
printf '%s\n' "$token" > /etc/herd/join-token
printf 'join: "@/etc/herd/join-token"\nca-hash: %s\n' "$hash" >> /etc/herd/agent.yaml
cmd=$(exec_start herd-agent)
$cmd > "$tmp/agent.log" 2>&1 &
pids+=($!)
up=0
for _ in $(seq 1 300); do
  if herd machines --json 2>/dev/null | jq -e '.machines[]? | select(.state == "UP")' > /dev/null; then up=1; break; fi
  sleep 0.1
done
[ $up -eq 1 ] || { cat "$tmp/agent.log"; fail "the agent did not join and come up"; }
say "agent joined and up: $cmd"

# 5. A job runs.
cat > "$tmp/job.yaml" <<JOB
name: hello
user: root
command: ["sleep", "600"]
resources: {cpu: 10m, memory: 16Mi}
JOB
herd submit "$tmp/job.yaml" > /dev/null
running=0
for _ in $(seq 1 300); do
  if herd tasks hello --json 2>/dev/null | jq -e '.tasks[]? | select(.state == "RUNNING")' > /dev/null; then running=1; break; fi
  sleep 0.1
done
[ $running -eq 1 ] || { cat "$tmp/agent.log"; fail "the job did not run"; }
say "job running"

# 6. Remove: the binaries go, the state and tasks' data stay.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null || true
pids=()
dpkg -r herd > "$tmp/dpkg-r.log" 2>&1 || { cat "$tmp/dpkg-r.log"; fail "dpkg -r"; }
[ ! -e /usr/bin/herd ] || fail "dpkg -r left /usr/bin/herd"
[ ! -e /lib/systemd/system/herd-agent.service ] || fail "dpkg -r left the units"
[ -f /var/lib/herd/master/cell.db ] || fail "dpkg -r removed the master's state"
ls -d /var/lib/herd/agent/runs/* > /dev/null 2>&1 || fail "dpkg -r removed tasks' run directories"
[ -f /etc/herd/master.yaml ] || fail "dpkg -r removed a conffile"
say "removed: binaries and units gone; state, tasks' data and configuration kept"

# 7. Purge: the state goes too.
kill_tasks
dpkg --purge herd > "$tmp/dpkg-purge.log" 2>&1 || { cat "$tmp/dpkg-purge.log"; fail "dpkg --purge"; }
[ ! -e /var/lib/herd/master ] || fail "purge left /var/lib/herd/master"
[ ! -e /etc/herd/master.yaml ] || fail "purge left a conffile"
say "purged"
echo "RESULT package_test_ms=$(( ($(date +%s%N) - start) / 1000000 ))"
say "PASS"
