# Shared by vm/perf-compare and vm/perf-ab (sourced, in the guest): the JVM that runs the perf tool.
#
# JIT c1 (the default): C1 only, as every other Java run in the guest (docs/vm.md): with C2 as well, the JVM crashes
# now and then under multi-threaded TCG, in compiled code the JIT rewrote under another virtual CPU. c2: the JVM's own
# default (tiered, C2 included), as on a real host, where the guest's 64 B round trip is about half of C1's
# (docs/performance.md); a run the emulator kills that way (exit 134 and a new hs_err file) is run again, at most
# twice, and says so.

# the JVM options of JIT $1 (c1, c2)
perf_jit_opts() {
  case $1 in
    c1) echo -XX:TieredStopAtLevel=1 ;;
    c2) echo -XX:TieredStopAtLevel=4 ;;
    *) echo "unknown JIT $1 (c1, c2)" >&2; return 2 ;;
  esac
}

# perf_java JIT DIR JAVA-ARGS...: java with the serial collector, JIT's options and hs_err files written into DIR
perf_java() {
  local jit=$1 dir=$2 try rc before opts
  shift 2
  opts=$(perf_jit_opts "$jit")
  for try in 1 2 3; do
    before=$(find "$dir" -maxdepth 1 -name 'hs_err_*.log' | wc -l)
    rc=0
    java -XX:+UseSerialGC $opts -XX:ErrorFile="$dir/hs_err_%p.log" "$@" || rc=$?
    if ((rc == 134 && try < 3)) && [ "$jit" = c2 ] &&
      (($(find "$dir" -maxdepth 1 -name 'hs_err_*.log' | wc -l) > before)); then
      echo "== the JVM crashed in JIT-compiled code (C2 under qemu TCG, docs/vm.md; $dir/hs_err_*.log): run again"
      continue
    fi
    return "$rc"
  done
}
