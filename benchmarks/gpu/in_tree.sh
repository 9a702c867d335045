#!/usr/bin/env bash
# Run a command in the repository as it was at an earlier commit, on a GPU host, so that a long
# measurement spread over several sessions (the field's second pass) measures every kernel with the
# same code while main moves on.
#
#   bash benchmarks/gpu/in_tree.sh ARCHIVE COMMAND...
#
# ARCHIVE is `git archive --format=tar.gz` of that commit (benchmarks/gpu/carry.sh makes it as
# .field/tree-<commit>.tar.gz when FIELD_TREE_COMMIT is set; it travels in the carried .field). It is
# unpacked into .field/tree beside this checkout (not under /tmp, which the sandbox's processes see
# as their own empty folder), the carried .whl, .redis and the field's checkout are linked into it,
# and COMMAND runs there. Paths handed to COMMAND must be absolute (for example FIELD_RESULTS).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 ARCHIVE COMMAND..." >&2; exit 2; }
archive=$(realpath "$1")
shift
root=$PWD
tree=$root/.field/tree
rm -rf "$tree"
mkdir -p "$tree/.field"
tar -xzf "$archive" -C "$tree"
for carried in .whl .redis .field/KernelBenchLeaderboard; do
  if [ -e "$root/$carried" ]; then ln -s "$root/$carried" "$tree/$carried"; fi
done
echo "in_tree: $(basename "$archive") unpacked into $tree; running: $*"
cd "$tree"
exec "$@"
