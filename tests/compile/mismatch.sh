#!/bin/sh
# tests/compile/mismatch.sh SRCDIR OUTDIR CC [ARGS...]: a program whose
# files disagree on PER_REAL must not link. The implementation is built
# with each node type and the user file with each; the matching pairs must
# link and run, the mismatched pairs must fail at link time, naming the
# missing per_..._<type> symbol.
set -e
src=$1 out=$2
shift 2
mkdir -p "$out"
fail=0
for impl in double float; do
  "$@" -I"$src" -DPER_REAL=$impl -c "$src/tests/compile/tu_impl.c" -o "$out/impl_$impl.o"
  for user in double float; do
    "$@" -I"$src" -DPER_REAL=$user -c "$src/tests/compile/tu_user.c" -o "$out/user_$user.o"
    if "$@" "$out/impl_$impl.o" "$out/user_$user.o" -o "$out/prog" -lm \
        2>"$out/link.log"; then
      if [ $impl = $user ]; then
        "$out/prog" >/dev/null || { echo "FAIL: $impl/$user links but does not run"; fail=1; }
        echo "ok: implementation $impl, user $user: links and runs"
      else
        echo "FAIL: implementation $impl, user $user: linked"; fail=1
      fi
    else
      if [ $impl = $user ]; then
        echo "FAIL: implementation $impl, user $user: does not link"; cat "$out/link.log"; fail=1
      elif grep -q "per_tree_[a-z_]*_$user" "$out/link.log"; then
        echo "ok: implementation $impl, user $user: link fails on per_tree_*_$user"
      else
        echo "FAIL: implementation $impl, user $user: link failed for another reason"
        cat "$out/link.log"; fail=1
      fi
    fi
  done
done
exit $fail
