package org.nettyrdma.verbs.jni;

import io.netty.util.internal.PlatformDependent;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nettyrdma.verbs.Errno;
import org.nettyrdma.verbs.VerbsException;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The native library as the build packs it: in META-INF/native with Netty's arch suffix, loadable with no JVM flag
 * and no java.library.path, from a jar. Skipped where the build could not compile it (no gcc or rdma-core headers).
 */
class NativeLibraryTest {
    private static final String RESOURCE = "META-INF/native/lib" + Native.LIBRARY_NAME + ".so";

    @BeforeAll
    static void builtHere() {
        assumeTrue(NativeLibraryTest.class.getClassLoader().getResource(RESOURCE) != null,
                RESOURCE + " was not built (no gcc or rdma-core headers)");
    }

    @Test
    void namedAsNettyLoadsIt() {
        assertEquals("netty_rdma_" + PlatformDependent.normalizedArch(), Native.LIBRARY_NAME);
    }

    @Test
    void loadsInThisJvm() {
        assertNull(Native.loadFailure(), () -> "load failure: " + Native.loadFailure());
    }

    @Test
    void setUpFailureFromCIsAVerbsException() {
        assumeTrue(!Files.exists(Paths.get("/sys/class/infiniband")), "this machine has RDMA");
        // thrown by netty_rdma_throw with the class and constructor cached in JNI_OnLoad
        VerbsException e = assertThrows(VerbsException.class, Native::getDevices);
        assertEquals("rdma_get_devices", e.verb());
        assertTrue(e.errno() > 0, e::getMessage);
    }

    @Test
    void deviceCountReportsTheKernel() {
        assumeTrue(!Files.exists(Paths.get("/sys/class/infiniband")), "this machine has RDMA");
        int n = Native.deviceCount();
        assertTrue(n == 0 || n == -Errno.ENOSYS, "ibv_get_device_list: " + n);
    }

    /** A fresh JVM, no flags, the classes and the library in one jar as mvn package builds it. */
    @Test
    void loadsFromAJarInAFreshJvm(@TempDir Path dir) throws Exception {
        Path classes = Paths.get(Native.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        Path testClasses = Paths.get(NativeLoadCheck.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        Path nettyCommon = Paths.get(PlatformDependent.class.getProtectionDomain().getCodeSource().getLocation()
                .toURI());
        Path jar = dir.resolve("transport.jar");
        jar(classes, jar);
        List<String> command = new ArrayList<>();
        command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-cp");
        command.add(jar + java.io.File.pathSeparator + testClasses + java.io.File.pathSeparator + nettyCommon);
        command.add(NativeLoadCheck.class.getName());
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output;
        try (var in = process.getInputStream()) {
            output = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "the JVM did not exit");
        assertEquals(0, process.exitValue(), output);
        assertTrue(output.contains("resource: jar:"), output);
        assertTrue(output.contains("\nloaded\n"), output);
        if (!Files.exists(Paths.get("/sys/class/infiniband"))) {
            assertTrue(output.contains("available: false"), output);
            assertTrue(output.contains("cause: kernel without RDMA support"), output);
        }
    }

    private static void jar(Path root, Path jar) throws IOException {
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar));
             Stream<Path> files = Files.walk(root)) {
            for (Path p : (Iterable<Path>) files.filter(Files::isRegularFile)::iterator) {
                out.putNextEntry(new JarEntry(root.relativize(p).toString().replace('\\', '/')));
                copy(p, out);
                out.closeEntry();
            }
        }
    }

    private static void copy(Path p, OutputStream out) throws IOException {
        Files.copy(p, out);
    }
}
