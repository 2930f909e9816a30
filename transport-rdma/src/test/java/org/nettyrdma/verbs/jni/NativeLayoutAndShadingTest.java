package org.nettyrdma.verbs.jni;

import io.netty.util.internal.PlatformDependent;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nettyrdma.verbs.CompletionArray;
import org.nettyrdma.verbs.WorkRequestList;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The layouts C defines and Java reads and checks at load time (JniLayout), and the library's registration under a
 * shaded build's package prefix. Both load the library, or a variant compiled here, into classes relocated by
 * {@link RelocatingClassLoader} as a shading plugin would relocate them, so that each load is a fresh one.
 */
class NativeLayoutAndShadingTest {
    private static final String RESOURCE = "META-INF/native/lib" + Native.LIBRARY_NAME + ".so";
    private static final String ARCH = PlatformDependent.normalizedArch();

    private static void assumeLibraryBuilt() {
        assumeTrue(NativeLayoutAndShadingTest.class.getClassLoader().getResource(RESOURCE) != null,
                RESOURCE + " was not built (no gcc or rdma-core headers)");
    }

    @Test
    void theLibraryOfThisBuildAgreesWithJava() {
        assumeLibraryBuilt();
        assertNull(Native.loadFailure());
        assertNull(JniLayout.describe(JniLayout.descriptorFields()));
        assertEquals(21, JniLayout.descriptorFields().size());
        assertEquals(WorkRequestList.OFFSET_SGES + 2 * WorkRequestList.SGE_SIZE, new WorkRequestList(1, 2).slotSize());
        assertEquals(32, CompletionArray.SLOT_SIZE);
        // values only C defines, as docs/descriptors.md gives them
        assertEquals(544, JniLayout.EVENT_SIZE);
        assertEquals(22, JniLayout.ADDRESS_BYTES);
        assertEquals(15, JniLayout.ATTR_COUNT);
        assertEquals(6, JniLayout.CAP_COUNT);
    }

    @Test
    void aMismatchNamesEachField() {
        assertNull(JniLayout.describe(List.of(new JniLayout.Field("A", 1, 1))));
        assertEquals("WorkRequestList.OFFSET_RKEY: 32 in Java, 36 in C, CompletionArray.SLOT_SIZE: 32 in Java, 40 in C",
                JniLayout.describe(List.of(new JniLayout.Field("WorkRequestList.OFFSET_RKEY", 32, 36),
                        new JniLayout.Field("X", 8, 8), new JniLayout.Field("CompletionArray.SLOT_SIZE", 32, 40))));
    }

    /**
     * A shaded build: io.netty and org.nettyrdma relocated under com.acme_x.shaded (an underscore, which Netty's
     * mangling escapes), the library renamed as Netty's NativeLibraryLoader then looks for it. JNI_OnLoad derives the
     * prefix from that name and registers on the relocated Native; C throws the relocated VerbsException.
     */
    @Test
    void loadsUnderAShadedPackagePrefix(@TempDir Path dir) throws Exception {
        assumeLibraryBuilt();
        String prefix = "com.acme_x.shaded.";
        Path library = dir.resolve("lib.so");
        try (InputStream in = getClass().getClassLoader().getResourceAsStream(RESOURCE)) {
            Files.copy(in, library);
        }
        ClassLoader loader = new RelocatingClassLoader(prefix,
                Map.of("META-INF/native/libcom_acme_1x_shaded_netty_rdma_" + ARCH + ".so", library),
                getClass().getClassLoader());
        Class<?> nativeClass = Class.forName(prefix + Native.class.getName(), true, loader);
        assertEquals(loader, nativeClass.getClassLoader());
        Object failure = call(nativeClass, "loadFailure");
        assertNull(failure, () -> "load failure: " + describe((Throwable) failure));
        assertTrue((Long) call(nativeClass, "memlockLimit") != 0);
        assertEquals(WorkRequestList.OFFSET_RKEY, call(nativeClass, "wrOffsetRkey"));
        if (!Files.exists(Paths.get("/sys/class/infiniband"))) {
            Throwable thrown = callFailing(nativeClass, "getDevices");
            assertEquals(prefix + "org.nettyrdma.verbs.VerbsException", thrown.getClass().getName(),
                    () -> describe(thrown));
        }
    }

    /**
     * The library built from this module's C sources with one descriptor offset changed (as a library of another
     * build might have it): the load check refuses it, and the provider says why; nothing crashes.
     */
    @Test
    void aLibraryWithAnotherLayoutIsRefusedWithTheCause(@TempDir Path dir) throws Exception {
        assumeLibraryBuilt();
        Path sources = Paths.get("src/main/c");
        assumeTrue(Files.isDirectory(sources), "the C sources are not at " + sources.toAbsolutePath());
        Path c = dir.resolve("c");
        Files.createDirectories(c);
        try (Stream<Path> files = Files.list(sources)) {
            for (Path p : (Iterable<Path>) files::iterator) {
                Files.copy(p, c.resolve(p.getFileName()));
            }
        }
        Path header = c.resolve("netty_rdma_layout.h");
        String layout = Files.readString(header);
        assertTrue(layout.contains("#define WR_OFFSET_RKEY 32\n"), "netty_rdma_layout.h no longer defines it so");
        Files.writeString(header, layout.replace("#define WR_OFFSET_RKEY 32\n", "#define WR_OFFSET_RKEY 36\n"));
        Path library = dir.resolve("libvariant.so");
        compile(c, library);

        String prefix = "com.acme.other.";
        ClassLoader loader = new RelocatingClassLoader(prefix,
                Map.of("META-INF/native/libcom_acme_other_netty_rdma_" + ARCH + ".so", library),
                getClass().getClassLoader());
        Class<?> nativeClass = Class.forName(prefix + Native.class.getName(), true, loader);
        Throwable failure = (Throwable) call(nativeClass, "loadFailure");
        assertEquals(prefix + JniLayout.Mismatch.class.getName(), failure.getClass().getName(), () -> describe(failure));
        assertTrue(failure.getMessage().contains("does not match these classes")
                && failure.getMessage().contains("WorkRequestList.OFFSET_RKEY: 32 in Java, 36 in C"),
                failure.getMessage());

        Class<?> provider = Class.forName(prefix + JniProvider.class.getName(), true, loader);
        Throwable cause = (Throwable) call(provider, "unavailabilityCause");
        assertTrue(cause instanceof UnsatisfiedLinkError && cause.getMessage().contains("OFFSET_RKEY"),
                () -> describe(cause));
    }

    private static void compile(Path sources, Path library) throws IOException, InterruptedException {
        String javaHome = System.getProperty("java.home");
        List<String> command = new ArrayList<>(List.of("gcc", "-O1", "-Wall", "-Werror", "-fvisibility=hidden",
                "-fPIC", "-shared", "-I" + javaHome + "/include", "-I" + javaHome + "/include/linux", "-o",
                library.toString()));
        try (Stream<Path> files = Files.list(sources)) {
            files.filter(p -> p.toString().endsWith(".c")).forEach(p -> command.add(p.toString()));
        }
        command.addAll(List.of("-libverbs", "-lrdmacm"));
        Process gcc = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(gcc.waitFor(120, TimeUnit.SECONDS), "gcc did not finish");
        assertEquals(0, gcc.exitValue(), () -> String.join(" ", command) + "\n" + output);
    }

    private static Object call(Class<?> clazz, String method) throws Exception {
        Method m = clazz.getDeclaredMethod(method);
        m.setAccessible(true);
        return m.invoke(null);
    }

    private static Throwable callFailing(Class<?> clazz, String method) throws Exception {
        try {
            call(clazz, method);
        } catch (InvocationTargetException e) {
            return e.getCause();
        }
        throw new AssertionError(method + " did not throw");
    }

    private static String describe(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            b.append(c).append("; ");
            for (Throwable s : c.getSuppressed()) {
                b.append("suppressed ").append(s).append("; ");
            }
        }
        return b.toString();
    }
}
