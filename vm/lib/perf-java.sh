# Shared by vm/perf-compare and vm/perf-ab (sourced, in the guest): the JVM that runs the perf tool.
#
# JIT c1 (the default): C1 only, as every other Java run in the guest (docs/vm.md): with C2 as well, the JVM crashes
# now and then under multi-threaded TCG, in compiled code the JIT rewrote under another virtual CPU. c2: the JVM's own
# default (tiered, C2 included), as a real host runs it; in the guest it halves the perf tool's 64 B round trip
# (docs/performance.md). A run the emulator kills that way (exit 134, and the hs_err file of that run names as the
# problem a JIT-compiled Java frame, "# J ...", or a bare address in no library, "# C  0x...": the pc jumped into the
# code cache or into data, seen 2026-12-07 with SEGV_ACCERR) is run again, at most twice, and says so; any other crash
# (a frame in a library: the native library "# C  [libnetty_rdma...]", the JVM "# V  [libjvm.so...]") fails the
# script as before.

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
  local jit=$1 dir=$2 try rc opts stamp frame
  shift 2
  opts=$(perf_jit_opts "$jit")
  for try in 1 2 3; do
    stamp=$(date +%s%N) # a name of this run's own: guest pids repeat from boot to boot, DIR may be reused
    rc=0
    java -XX:+UseSerialGC $opts -XX:ErrorFile="$dir/hs_err_${stamp}_%p.log" "$@" || rc=$?
    frame=$(cat "$dir"/hs_err_"${stamp}"_*.log 2> /dev/null | grep -m 1 -A 1 '^# Problematic frame:' | tail -n 1 || true)
    if ((rc == 134 && try < 3)) && [ "$jit" = c2 ] && { [[ $frame == '# J '* ]] || [[ $frame =~ ^#\ C\ +0x[0-9a-fA-F]+$ ]]; }; then
      echo "== the JVM crashed in JIT-compiled code or at an address in no library (C2 under qemu TCG, docs/vm.md): ${frame#\# }; run again"
      continue
    fi
    return "$rc"
  done
}
