package org.nettyrdma.deploy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Runs the image's entrypoint.sh with made-up {@code java} and {@code ip} commands first on the PATH: what java gets,
 * the RDMA interface's address in place of @rdma-ip@, and the errors.
 */
class EntrypointScriptTest {
    @TempDir
    Path bin;

    private record Result(int exitCode, String out) {
    }

    private Result run(String rdmaInterface, String... args) throws IOException, InterruptedException {
        script("java", "printf 'java'; for a; do printf ' [%s]' \"$a\"; done; echo; echo \"memlock $(ulimit -l)\"");
        // the interface of the default route is eth0 (10.0.0.5); net1 has 192.168.100.10; lo none of scope global
        script("ip", """
                case "$*" in
                  "-4 route show default") echo "default via 10.0.0.1 dev eth0 proto dhcp" ;;
                  "-4 -o addr show dev eth0 scope global")
                    echo "2: eth0    inet 10.0.0.5/24 scope global eth0\\\\       valid_lft forever" ;;
                  "-4 -o addr show dev net1 scope global")
                    echo "3: net1    inet 192.168.100.10/24 scope global net1\\\\       valid_lft forever" ;;
                  *) ;;
                esac""");
        List<String> command = new java.util.ArrayList<>(List.of("sh", Manifests.DOCKER.resolve("entrypoint.sh")
                .toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().put("PATH", bin + ":" + System.getenv("PATH"));
        pb.environment().remove("RDMA_INTERFACE");
        pb.environment().remove("JAVA_OPTS");
        if (rdmaInterface != null) {
            pb.environment().put("RDMA_INTERFACE", rdmaInterface);
        }
        Process p = pb.start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "entrypoint.sh did not end");
        return new Result(p.exitValue(), new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
    }

    private void script(String name, String body) throws IOException {
        Path file = bin.resolve(name);
        Files.writeString(file, "#!/bin/sh\n" + body + "\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    @Test
    void runsTheMainClassOnTheJarWithTheRdmaInterfacesAddress() throws Exception {
        Result r = run("net1", "org.nettyrdma.examples.echo.EchoServer", "@rdma-ip@", "7000");
        assertEquals(0, r.exitCode(), r.out());
        assertTrue(r.out().contains("java [-cp] [/opt/netty-rdma/netty-rdma-examples.jar] "
                + "[org.nettyrdma.examples.echo.EchoServer] [192.168.100.10] [7000]\n"), r.out());
    }

    @Test
    void withoutRdmaInterfaceTheDefaultRoutesInterfaceCounts() throws Exception {
        Result r = run(null, "org.nettyrdma.tools.Main", "doctor", "--address", "@rdma-ip@");
        assertEquals(0, r.exitCode(), r.out());
        assertTrue(r.out().contains("[org.nettyrdma.tools.Main] [doctor] [--address] [10.0.0.5]\n"), r.out());
    }

    @Test
    void argumentsWithSpacesStayWholeAndTheLimitIsRaised() throws Exception {
        Result r = run("net1", "Main", "a b", "c");
        assertTrue(r.out().contains("java [-cp] [/opt/netty-rdma/netty-rdma-examples.jar] [Main] [a b] [c]\n"),
                r.out());
        String hard = new String(new ProcessBuilder("sh", "-c", "ulimit -H -l").start().getInputStream()
                .readAllBytes(), StandardCharsets.UTF_8).strip();
        // raised to the hard limit, or to unlimited where the process may raise the hard limit (CAP_SYS_RESOURCE)
        assertTrue(r.out().contains("memlock " + hard + "\n") || r.out().contains("memlock unlimited\n"),
                "the soft limit raised to the hard one (" + hard + "): " + r.out());
    }

    @Test
    void noAddressOnTheInterfaceOrNoMainClassFails() throws Exception {
        Result r = run("lo", "Main", "@rdma-ip@");
        assertEquals(2, r.exitCode(), r.out());
        assertTrue(r.out().contains("no IPv4 address on lo for @rdma-ip@"), r.out());
        Result none = run("net1");
        assertEquals(2, none.exitCode());
        assertTrue(none.out().contains("usage: entrypoint.sh MAIN_CLASS"), none.out());
    }
}
