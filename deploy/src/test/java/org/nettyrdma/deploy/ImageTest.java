package org.nettyrdma.deploy;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.Probe;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.nettyrdma.deploy.Manifests.Pod;

import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The examples image as the Dockerfile builds it: its entrypoint is the script it copies, which raises the memlock
 * limit and runs java on the jar the Dockerfile copies; the default command and every manifest's first argument are
 * main classes of the examples jar as Maven built it; every probe's command is a file of the image.
 */
class ImageTest {
    /** The build context: the repository's root. */
    private static final Path CONTEXT = Paths.get("..");
    private static final Path EXAMPLES_JAR = CONTEXT.resolve("examples/target/netty-rdma-examples.jar");

    private static Dockerfile dockerfile;
    private static URLClassLoader examplesJar;

    @BeforeAll
    static void parse() throws IOException {
        dockerfile = Dockerfile.parse(Manifests.DOCKER.resolve("Dockerfile"));
        assertTrue(Files.isRegularFile(EXAMPLES_JAR), EXAMPLES_JAR + " is not built (mvn package builds the examples "
                + "before this module)");
        examplesJar = new URLClassLoader(new URL[] {EXAMPLES_JAR.toUri().toURL()},
                ClassLoader.getPlatformClassLoader());
    }

    /** The file the image has at {@code path}: the COPY source in the build context, which must exist. */
    private static Path source(String path) {
        String source = dockerfile.copySourceOf(path);
        assertNotNull(source, "no COPY to " + path);
        Path file = CONTEXT.resolve(source);
        assertTrue(source.equals("examples/target/netty-rdma-examples.jar") || Files.isRegularFile(file),
                "the COPY source " + source + " is not in the repository");
        return file;
    }

    private static void assertMainClass(String className, String where) {
        Method main;
        try {
            main = Class.forName(className, false, examplesJar).getMethod("main", String[].class);
        } catch (ClassNotFoundException | NoSuchMethodException e) {
            throw new AssertionError(where + ": " + className + " is not a main class of " + EXAMPLES_JAR, e);
        }
        assertTrue(Modifier.isStatic(main.getModifiers()) && main.getReturnType() == void.class, where);
    }

    @Test
    void entrypointIsTheCopiedScriptThatRaisesMemlockAndRunsTheJar() throws IOException {
        List<String> entrypoint = dockerfile.last("ENTRYPOINT").execForm();
        assertEquals(1, entrypoint.size(), "the script takes the command's arguments: " + entrypoint);
        Path script = source(entrypoint.get(0));
        assertTrue(Files.isExecutable(script), script + " must be executable (COPY keeps the mode)");
        String text = Files.readString(script);
        assertTrue(text.startsWith("#!/bin/sh\n"), "the JRE image has sh");
        assertTrue(text.contains("ulimit -l unlimited"), "raises the memlock limit before java starts");
        Matcher jar = Pattern.compile("(?m)^jar=(\\S+)$").matcher(text);
        assertTrue(jar.find(), "the script names its jar");
        assertEquals("examples/target/netty-rdma-examples.jar", dockerfile.copySourceOf(jar.group(1)),
                "the jar the script runs is the examples jar the Dockerfile copies");
        assertTrue(text.contains("exec java ${JAVA_OPTS:-} -cp \"$jar\" \"$main\" \"$@\""), "runs the main class");
        int ulimit = text.indexOf("ulimit -l");
        assertTrue(ulimit < text.indexOf("exec java"), "the limit is raised before the JVM starts");
    }

    @Test
    void defaultCommandIsAMainClassOfTheExamplesJar() {
        List<String> cmd = dockerfile.last("CMD").execForm();
        assertMainClass(cmd.get(0), "CMD");
    }

    @Test
    void everyManifestArgumentListStartsWithAMainClass() {
        int checked = 0;
        for (Pod pod : Manifests.pods(Manifests.all())) {
            for (Container c : pod.allContainers()) {
                if (c.getCommand() == null || c.getCommand().isEmpty()) {
                    assertMainClass(c.getArgs().get(0), pod.describe() + " " + c.getName());
                    checked++;
                }
            }
        }
        assertTrue(checked >= 8, "servers, clients and their doctors of both variants: " + checked);
    }

    @Test
    void probesAndCommandsAreInTheImage() throws IOException {
        String install = String.join(" ", dockerfile.all("RUN").stream().map(Dockerfile.Instruction::arguments)
                .toList());
        for (String pkg : List.of("perftest", "ibverbs-providers", "iproute2")) {
            assertTrue(install.matches("(?s).*apt-get install[^&]*\\b" + pkg + "\\b.*"), "installs " + pkg);
        }
        for (Pod pod : Manifests.pods(Manifests.all())) {
            for (Container c : pod.allContainers()) {
                for (Probe probe : new Probe[] {c.getReadinessProbe(), c.getLivenessProbe(), c.getStartupProbe()}) {
                    if (probe != null && probe.getExec() != null) {
                        Path script = source(probe.getExec().getCommand().get(0));
                        assertTrue(Files.isExecutable(script), script.toString());
                    }
                }
            }
        }
    }
}
