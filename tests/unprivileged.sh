#!/bin/sh
# Runs pytest as a user who is not root (`make test-unprivileged`): there, no control group can be made,
# so commands run under the subreaper (hilbert.commands.reaper) and the cgroup tests skip.
#
#   tests/unprivileged.sh USER PYTHON PYTEST-ARGS...      (as root, in the repository's root)
#
# HOME, HILBERT_HOME, TMPDIR and pytest's temporary folders are a fresh folder of USER's, removed after;
# nothing is written in the tree (no bytecode, no pytest cache). Where USER cannot reach PYTHON's own
# prefix (a pyenv Python under /root, mode 700) or the tree (a clone under /root), the tests run in a
# mount namespace of their own in which the folders that block the way are empty ones with only that
# prefix and the tree bound back. The disk-fill tests get small tmpfs disks mounted for USER.
set -eu
user=$1 python=$2
shift 2
fail() { echo "tests/unprivileged.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (to run the tests as $user)"
scratch=$(runuser -u "$user" -- mktemp -d -t hilbert-test.XXXXXX)
# small disks of their own for the disk-fill tests (tests/fleet/test_disk_full.py), which cannot mount one
disks=""
for size in 64m 8m; do
  mkdir "$scratch/disk-$size" && mount -t tmpfs -o "size=$size,uid=$(id -u "$user"),mode=700" tmpfs "$scratch/disk-$size"
  disks="$disks HILBERT_TEST_DISK_$(echo $size | tr m M)=$scratch/disk-$size"
done
trap 'for d in "$scratch"/disk-*; do umount -l "$d"; done; rm -rf "$scratch"' EXIT
set -- env HOME="$scratch" HILBERT_HOME="$scratch/hilbert" TMPDIR="$scratch" PYTHONDONTWRITEBYTECODE=1 $disks \
  "$python" -m pytest -p no:cacheprovider --basetemp="$scratch/pytest" "$@"
tree=$(pwd -P)
if runuser -u "$user" -- "$python" -c pass 2>/dev/null && runuser -u "$user" -- test -r "$tree/pyproject.toml"; then
  runuser -u "$user" -- "$@"
  exit
fi
# the first folder on the way to $1 that $user cannot pass (none: empty)
blocked_of() {
  path=""
  for part in $(echo "$1" | tr / ' '); do
    path="$path/$part"
    runuser -u "$user" -- test -x "$path" || { echo "$path"; return; }
  done
}
base=$("$python" -c 'import sys; print(sys.base_prefix)')
blocked=$(for need in "$base" "$tree"; do blocked_of "$need"; done | sort -u | tr '\n' ' ')
[ -n "$blocked" ] || fail "$user cannot run $python in $tree"
keep=$(mktemp -d)
# in a mount namespace of its own: each blocked folder an empty tmpfs, the Python and the tree bound back
unshare --mount --propagation private sh -c '
  keep=$1 blocked=$2 base=$3 tree=$4 user=$5; shift 5
  mkdir "$keep/base" "$keep/tree" && mount --bind "$base" "$keep/base" && mount --bind "$tree" "$keep/tree" &&
    for b in $blocked; do mount -t tmpfs -o mode=755 hilbert-test "$b" || exit 1; done &&
    mkdir -p "$base" "$tree" && mount --bind "$keep/base" "$base" && mount --bind "$keep/tree" "$tree" &&
    cd "$tree" && exec runuser -u "$user" -- "$@"' \
  sh "$keep" "$blocked" "$base" "$tree" "$user" "$@" || status=$?
rmdir "$keep/base" "$keep/tree" "$keep"  # empty here: the binds were in the namespace only
exit "${status:-0}"
