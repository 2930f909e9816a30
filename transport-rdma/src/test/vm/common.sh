# Shared by conformance.sh and transport.sh (sourced, not run): the host side (checks of the build, the test class
# path written once from Maven) and the guest side (the class path and JVM of the lean JUnit runners, which run
# without Maven: org.nettyrdma.verbs.jni.VmTestLauncher). Messages are prefixed with the script's name.
vm_script=${0##*/}
module=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
root=$(cd "$module/.." && pwd)
cpfile=$module/target/vm-test-classpath.txt

# host: checks that the runner class $1 (e.g. org/nettyrdma/verbs/jni/VmConformanceMain) and the native library are
# built, and saves the test class path (from Maven, again when the pom is newer)
vm_prepare_host() {
  [ -f "$module/target/test-classes/$1.class" ] ||
    { echo "$vm_script: build first: mvn -pl transport-rdma -am test-compile" >&2; exit 2; }
  ls "$module"/target/classes/META-INF/native/libnetty_rdma_*.so > /dev/null 2>&1 ||
    { echo "$vm_script: no native library in target/classes" \
        "(apt-get install gcc libibverbs-dev librdmacm-dev, then rebuild)" >&2; exit 2; }
  if [ ! -s "$cpfile" ] || [ "$module/pom.xml" -nt "$cpfile" ]; then
    (cd "$root" && mvn -B -q -pl transport-rdma dependency:build-classpath -Dmdep.includeScope=test \
      -Dmdep.outputFile="$cpfile") || { echo "$vm_script: mvn dependency:build-classpath failed" >&2; exit 2; }
  fi
}

# host: copies target/classes and target/test-classes to a directory of this run (removed when the script exits), for
# the guest (VM_TEST_CLASSES): a build of the same checkout that runs meanwhile (mvn recompiles by deleting and
# rewriting the class files) cannot then change the classes under the running tests
vm_snapshot_classes() {
  vm_snapshot=$(mktemp -d "${TMPDIR:-/tmp}/netty-rdma-vm-classes.XXXXXX")
  trap 'rm -rf "$vm_snapshot"' EXIT
  cp -a "$module/target/classes" "$module/target/test-classes" "$vm_snapshot/" ||
    { echo "$vm_script: cannot copy the classes to $vm_snapshot" >&2; exit 2; }
  export VM_TEST_CLASSES=$vm_snapshot
}

# guest: sets vm_classpath (the module's classes, test classes and test dependencies) and vm_java
vm_guest_setup() {
  [ -s "$cpfile" ] || { echo "$vm_script: no $cpfile: run $vm_script --prepare on the host first" >&2; exit 2; }
  # logging jars of netty-testsuite are left out: the runner prints its own lines
  local deps classes=${VM_TEST_CLASSES:-$module/target}
  deps=$(tr ':' '\n' < "$cpfile" | grep -Ev '/(logback-[a-z]+|slf4j-api)-[^/]*\.jar$' | paste -sd: -)
  vm_classpath=$classes/classes:$classes/test-classes:$deps
  vm_java=${JAVA_HOME:+$JAVA_HOME/bin/}java
}
