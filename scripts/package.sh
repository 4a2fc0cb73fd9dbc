#!/usr/bin/env bash
# Builds the Debian package of what build/ holds (it compiles nothing: run
# ./scripts/build.sh first):
#   build/package/herd_<version>_amd64.deb  herd and herd-shim, stripped;
#       systemd units herd-master, herd-agent and herd-scheduler
#       (lib/systemd/system); configuration in /etc/herd (conffiles); a man
#       page; a system user "herd" for the master and schedulers
#   build/package/herd_<version>_amd64.debug.tar.xz  their debug symbols,
#       by build id (usr/lib/debug/.build-id/..), for gdb's debug-file-directory
# With --check, also runs lintian (which must be clean) and
# systemd-analyze verify on the units.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=$(realpath "${BUILD_DIR:-build}")
check=0
[ "${1:-}" = "--check" ] && check=1
for b in herd herd-shim; do
  [ -x "$BUILD_DIR/bin/$b" ] || { echo "package: $BUILD_DIR/bin/$b is missing: run ./scripts/build.sh first" >&2; exit 2; }
done

base=$(sed -n 's/^project(herd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
when=$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d)
commit=$(git rev-parse --short=8 HEAD 2>/dev/null || echo unknown)
version="${base}+git${when}.${commit}"
arch=$(dpkg --print-architecture)
out="$BUILD_DIR/package"
stage="$out/herd_${version}_${arch}"
debug="$out/debug"
rm -rf "$out"  # only this version's files are left there

mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/etc/herd" \
         "$stage/usr/share/doc/herd" "$stage/usr/share/man/man1" "$debug"

# Binaries: the debug info goes to a file named by the build id, the
# binary keeps a link to it.
for b in herd herd-shim; do
  src="$BUILD_DIR/bin/$b"
  id=$(readelf -n "$src" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p' | head -1)
  if [ -n "$id" ]; then
    dbg="$debug/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
    mkdir -p "$(dirname "$dbg")"
    objcopy --only-keep-debug --compress-debug-sections "$src" "$dbg"
    chmod 0644 "$dbg"
  fi
  install -m 0755 "$src" "$stage/usr/bin/$b"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/$b"
  if [ -n "$id" ]; then objcopy --add-gnu-debuglink="$dbg" "$stage/usr/bin/$b"; fi
done

install -m 0644 packaging/debian/herd-master.service packaging/debian/herd-agent.service \
  packaging/debian/herd-scheduler.service "$stage/lib/systemd/system/"
install -m 0644 packaging/debian/master.yaml packaging/debian/agent.yaml packaging/debian/scheduler.yaml \
  "$stage/etc/herd/"
install -m 0644 packaging/debian/copyright "$stage/usr/share/doc/herd/copyright"
install -m 0644 README.md "$stage/usr/share/doc/herd/README.md"
for f in operating upgrades agent; do gzip -9n < "docs/$f.md" > "$stage/usr/share/doc/herd/$f.md.gz"; done
chmod 0644 "$stage"/usr/share/doc/herd/*
printf 'herd (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- Herd developers <herd@example.org>  %s\n' \
  "$version" "$commit" "$(date -R -d @"$(git log -1 --format=%ct 2>/dev/null || date +%s)")" |
  gzip -9n > "$stage/usr/share/doc/herd/changelog.gz"
chmod 0644 "$stage/usr/share/doc/herd/changelog.gz"
# herd-shim is static on purpose: it runs in a task's root, where none of
# the machine's libraries may be.
install -d "$stage/usr/share/lintian/overrides"
install -m 0644 packaging/debian/lintian-overrides "$stage/usr/share/lintian/overrides/herd"

# Man pages from the programs' own help.
man() {  # NAME SECTION-TEXT
  local name=$1 summary=$2 help
  help=$("$BUILD_DIR/bin/herd" --help 2>&1 || true)
  {
    printf '.TH %s 1 "%s" "herd %s" "User Commands"\n' "$(echo "$name" | tr a-z A-Z)" "$when" "$version"
    printf '.SH NAME\n%s \\- %s\n' "$name" "$summary"
    printf '.SH SYNOPSIS\n.B %s\n.I COMMAND\n[\\fIFLAGS\\fR]\n' "$name"
    printf '.SH DESCRIPTION\n'
    if [ "$name" = herd ]; then
      printf '.nf\n'
      printf '%s\n' "$help" | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/"
      printf '.fi\n'
    else
      printf 'The per-task supervisor the Herd agent starts for every task attempt; not run by hand.\n'
    fi
    printf '.SH SEE ALSO\n/usr/share/doc/herd/README.md, /usr/share/doc/herd/operating.md.gz\n'
  } | gzip -9n > "$stage/usr/share/man/man1/$name.1.gz"
  chmod 0644 "$stage/usr/share/man/man1/$name.1.gz"
}
man herd "the Herd cluster manager: master, agent, scheduler and command line"
man herd-shim "supervisor of one Herd task attempt"

install -m 0755 packaging/debian/postinst packaging/debian/postrm "$stage/DEBIAN/"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
printf '/etc/herd/master.yaml\n/etc/herd/agent.yaml\n/etc/herd/scheduler.yaml\n' > "$stage/DEBIAN/conffiles"

# Shared-library dependencies, as dpkg-shlibdeps finds them (herd-shim is
# static).
tmp=$(mktemp -d)
mkdir -p "$tmp/debian"
printf 'Source: herd\n\nPackage: herd\nArchitecture: any\n' > "$tmp/debian/control"
depends=$(cd "$tmp" && dpkg-shlibdeps -O --warnings=0 "$stage/usr/bin/herd" |
          sed -n 's/^shlibs:Depends=//p')
rm -rf "$tmp"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: herd
Version: $version
Architecture: $arch
Maintainer: Herd developers <herd@example.org>
Installed-Size: $size
Depends: adduser, $depends
Recommends: etcd-server
Section: admin
Priority: optional
Description: cluster manager for services and batch work
 Herd admits, schedules, starts, restarts and monitors every workload of a
 pool of machines (a cell): services that must not go down and batch jobs
 that use what is left, packed tightly without letting batch work hurt
 services, in the tradition of Google's Borg.
 .
 This package holds the herd program (master, agent, scheduler and command
 line) with systemd units for each role.
CONTROL

deb="$out/herd_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
tar -C "$debug" -I 'xz -T0 -1' -cf "$out/herd_${version}_${arch}.debug.tar.xz" .
echo "package: $deb ($(du -h "$deb" | cut -f1)); debug symbols: $out/herd_${version}_${arch}.debug.tar.xz"
echo "RESULT deb_bytes=$(stat -c %s "$deb")"

if [ $check -eq 1 ]; then
  lintian --fail-on warning,error "$deb"
  echo "package: lintian clean"
  # Verified in a root that holds the package and the system's own units
  # (the targets the units name).
  root=$(mktemp -d)
  cp -a "$stage"/. "$root"/
  rm -rf "$root/DEBIAN"
  cp -rn /lib/systemd/system/. "$root/lib/systemd/system/"
  SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --root="$root" --man=no \
    herd-master.service herd-agent.service herd-scheduler.service
  rm -rf "$root"
  echo "package: systemd-analyze verify clean"
fi
