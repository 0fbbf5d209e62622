#!/bin/bash
# usage: [TMO=5] loop.sh N npipes iters groups mode
# Runs ./repro N times (each killed after TMO s: rc 137 = hung), prints exit-code counts
# (0 ok, 134 SIGABRT, 139 SIGSEGV, 137 killed/hung) and the distinct stderr messages.
n=$1; shift
declare -A c
: > ${TMPDIR:-/tmp}/msgs.$$
for i in $(seq $n); do
  timeout -s KILL ${TMO:-5} ./repro "$@" >/dev/null 2>${TMPDIR:-/tmp}/err.$$
  rc=$?; c[$rc]=$(( ${c[$rc]:-0} + 1 ))
  [ $rc != 0 ] && cat ${TMPDIR:-/tmp}/err.$$ >> ${TMPDIR:-/tmp}/msgs.$$
done
printf "LP_NUM_THREADS=%s  ./repro %s  ->" "${LP_NUM_THREADS-unset}" "$*"
for k in $(echo "${!c[@]}" | tr ' ' '\n' | sort -n); do printf " rc%s:%s" "$k" "${c[$k]}"; done; echo
sort ${TMPDIR:-/tmp}/msgs.$$ | uniq -c | sed 's/^/    /'
rm -f ${TMPDIR:-/tmp}/msgs.$$ ${TMPDIR:-/tmp}/err.$$
