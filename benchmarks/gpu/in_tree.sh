#!/usr/bin/env bash
# Run a command in the repository as it was at an earlier commit, on a GPU host, so that a long
# measurement spread over several sessions (the field's second pass) measures every kernel with the
# same code while main moves on.
#
#   bash benchmarks/gpu/in_tree.sh ARCHIVE COMMAND...
#   bash benchmarks/gpu/in_tree.sh --overlay ARCHIVE COMMAND...
#
# ARCHIVE is `git archive --format=tar.gz` of that commit (benchmarks/gpu/carry.sh makes it as
# .field/tree-<commit>.tar.gz when FIELD_TREE_COMMIT is set; it travels in the carried .field). It is
# unpacked into .field/tree beside this checkout (not under /tmp, which the sandbox's processes see
# as their own empty folder), the carried .whl, .redis and the field's checkout are linked into it,
# and COMMAND runs there. Paths handed to COMMAND must be absolute (for example FIELD_RESULTS).
#
# --overlay: ARCHIVE holds some of the repository's folders only (carry.sh's
# .field/evaluation-<commit>.tar.gz, `git archive COMMIT evaluation`, when FIELD_EVALUATION_COMMIT is
# set): the tree is this checkout with those folders as they were at that commit, the rest as it is
# now. So a pass keeps the evaluation library it began with while the site's code moves on.
set -euo pipefail
overlay=""
if [ "${1:-}" = "--overlay" ]; then
  overlay=1
  shift
fi
[ $# -ge 2 ] || { echo "usage: $0 [--overlay] ARCHIVE COMMAND..." >&2; exit 2; }
archive=$(realpath "$1")
shift
root=$PWD
tree=$root/.field/tree
rm -rf "$tree"
mkdir -p "$tree"
if [ -n "$overlay" ]; then
  # This checkout without what is carried (linked below) or made here; then each of the archive's
  # top-level folders replaces this checkout's whole, so that a file it lacks does not stay behind.
  tar -C "$root" --exclude=./.field --exclude=./.whl --exclude=./.redis --exclude=./.venv --exclude=./.git \
    -cf - . | tar -xf - -C "$tree"
  for top in $(tar -tzf "$archive" | cut -d/ -f1 | sort -u); do rm -rf "${tree:?}/$top"; done
fi
mkdir -p "$tree/.field"
tar -xzf "$archive" -C "$tree"
for carried in .whl .redis .field/KernelBenchLeaderboard; do
  if [ -e "$root/$carried" ]; then ln -s "$root/$carried" "$tree/$carried"; fi
done
echo "in_tree: $(basename "$archive") unpacked into $tree${overlay:+ over this checkout}; running: $*"
cd "$tree"
exec "$@"
