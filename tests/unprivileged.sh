#!/bin/sh
# Runs pytest as a user who is not root (`make test-unprivileged`): there, no control group can be made,
# so commands run under the subreaper (hilbert.commands.reaper) and the cgroup tests skip.
#
#   tests/unprivileged.sh USER PYTHON PYTEST-ARGS...      (as root, in the repository's root)
#
# HOME, HILBERT_HOME, TMPDIR and pytest's temporary folders are a fresh folder of USER's, removed after;
# nothing is written in the tree (no bytecode, no pytest cache). Where USER cannot reach PYTHON's own
# prefix (a pyenv Python under /root, mode 700), the tests run in a mount namespace of their own in
# which the folder that blocks the way is an empty one with only that prefix bound back.
set -eu
user=$1 python=$2
shift 2
fail() { echo "tests/unprivileged.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (to run the tests as $user)"
runuser -u "$user" -- test -r pyproject.toml || fail "$user cannot read $(pwd); clone the tree where others can"
scratch=$(runuser -u "$user" -- mktemp -d -t hilbert-test.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
set -- env HOME="$scratch" HILBERT_HOME="$scratch/hilbert" TMPDIR="$scratch" PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -p no:cacheprovider --basetemp="$scratch/pytest" "$@"
if runuser -u "$user" -- "$python" -c pass 2>/dev/null; then
  runuser -u "$user" -- "$@"
  exit
fi
base=$("$python" -c 'import sys; print(sys.base_prefix)')
blocked="" path=""
for part in $(echo "$base" | tr / ' '); do
  path="$path/$part"
  runuser -u "$user" -- test -x "$path" || { blocked=$path; break; }
done
[ -n "$blocked" ] || fail "$user cannot run $python"
keep=$(mktemp -d)
unshare --mount --propagation private sh -c '
  keep=$1 blocked=$2 base=$3 user=$4; shift 4
  mount --bind "$base" "$keep" && mount -t tmpfs -o mode=755 hilbert-test "$blocked" &&
    mkdir -p "$base" && mount --bind "$keep" "$base" && exec runuser -u "$user" -- "$@"' \
  sh "$keep" "$blocked" "$base" "$user" "$@" || status=$?
rmdir "$keep"
exit "${status:-0}"
