#!/bin/sh
# tests/check_layout.sh: the shape of the source tree, checked.
#
#  1. Layers: an #include "x.h" in one folder may name a header of its own
#     folder or of a folder it is allowed to use (below); never one above, so
#     there is no include circle between folders:
#        policy   nothing (pure: structs in, decisions out)
#        common   policy (planrun.c runs the planner's searches)
#        cupti    common
#        core     common
#        mover    core common cupti
#        exec     mover core common policy cupti
#        engine   exec mover core common policy cupti
#        hooks    engine core common
#        utils    common policy
#  2. No source file outside tests/ over 1000 lines.
#  3. No function over 150 lines (from the line that starts with its name to
#     the closing brace in column 0).
# Prints each violation; exits 1 if there is one, 0 otherwise.
top=${EBBTEST_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 99

folders="policy src/common cupti src/core src/mover src/exec src/engine src/hooks utils"
allowed() {
	case $1 in
	policy) echo "" ;;
	src/common) echo "policy" ;;
	cupti) echo "src/common" ;;
	src/core) echo "src/common" ;;
	src/mover) echo "src/core src/common cupti" ;;
	src/exec) echo "src/mover src/core src/common policy cupti" ;;
	src/engine) echo "src/exec src/mover src/core src/common policy cupti" ;;
	src/hooks) echo "src/engine src/core src/common" ;;
	utils) echo "src/common policy" ;;
	esac
}

bad=0
# header name -> its folder
map=$(for d in $folders; do
	for h in "$d"/*.h "$d"/*.def; do
		[ -f "$h" ] && echo "$(basename "$h") $d"
	done
done)
for d in $folders; do
	ok=" $d $(allowed "$d") "
	for f in "$d"/*.c "$d"/*.h "$d"/*.def; do
		[ -f "$f" ] || continue
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
			owner=$(echo "$map" | awk -v h="$inc" '$1 == h { print $2; exit }')
			[ -z "$owner" ] && continue	# config.h and the like
			case $ok in
			*" $owner "*) ;;
			*) echo "check_layout: $f includes $inc, of $owner, which $d may not use"
			   bad=1 ;;
			esac
		done
	done
done

for d in $folders; do
	for f in "$d"/*.c "$d"/*.h; do
		[ -f "$f" ] || continue
		n=$(wc -l <"$f")
		if [ "$n" -gt 1000 ]; then
			echo "check_layout: $f has $n lines (1000 at most)"
			bad=1
		fi
		awk -v f="$f" '
			/^[A-Za-z_][A-Za-z0-9_]*\(/ { name = $0; start = FNR; next }
			/^}/ && start { if (FNR - start > 150)
				printf "check_layout: %s: %s is %d lines (150 at most)\n", f, name, FNR - start
				start = 0 }' "$f" | grep . && bad=1
	done
done
exit $bad
