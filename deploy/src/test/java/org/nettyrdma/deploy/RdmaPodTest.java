package org.nettyrdma.deploy;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.SecurityContext;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServicePort;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import org.junit.jupiter.api.Test;
import org.nettyrdma.deploy.Manifests.Manifest;
import org.nettyrdma.deploy.Manifests.Pod;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What RDMA needs of every pod of the manifests: one RDMA device resource per container (the shared-device plugin's,
 * or the SR-IOV resource that the pod's network names), the IPC_LOCK capability as root (capabilities.add gives a
 * non-root process no effective capability), the memlock handling of the image's entrypoint, an address on the RDMA
 * network; the server's probes and port; the clients aimed at their servers' addresses; perftest's ib_read_bw -q 30.
 */
class RdmaPodTest {
    private static final String SHARED_DEVICE = "rdma/rdma_shared_device_a";
    private static final String NETWORKS = "k8s.v1.cni.cncf.io/networks";
    private static final String RESOURCE_NAME = "k8s.v1.cni.cncf.io/resourceName";
    private static final String IMAGE_ENTRYPOINT = "/opt/netty-rdma/entrypoint.sh";

    /** The RDMA resource the pods of a variant must request: the network's resourceName, or the shared device. */
    private static String deviceResource(Path variant) {
        GenericKubernetesResource nad = network(variant);
        String sriov = nad.getMetadata().getAnnotations() == null ? null
                : nad.getMetadata().getAnnotations().get(RESOURCE_NAME);
        return sriov != null ? sriov : SHARED_DEVICE;
    }

    private static GenericKubernetesResource network(Path variant) {
        Map<String, GenericKubernetesResource> nads = Manifests.networks(Manifests.in(variant));
        assertEquals(1, nads.size(), variant.toString());
        return nads.values().iterator().next();
    }

    @Test
    void everyContainerRequestsOneRdmaDeviceOfItsVariant() {
        for (Path variant : Manifests.variants()) {
            String resource = deviceResource(variant);
            if (variant.endsWith("sriov")) {
                assertFalse(resource.equals(SHARED_DEVICE), "the SR-IOV network names its VF resource");
            } else {
                assertEquals(SHARED_DEVICE, resource);
            }
            for (Pod pod : Manifests.pods(Manifests.in(variant))) {
                for (Container c : pod.allContainers()) {
                    Map<String, Quantity> limits = c.getResources().getLimits();
                    assertNotNull(limits, pod.describe() + " " + c.getName() + ": no limits");
                    assertEquals(new Quantity("1"), limits.get(resource), pod.describe() + " " + c.getName()
                            + ": limits." + resource);
                    long rdmaResources = limits.keySet().stream()
                            .filter(k -> k.startsWith("rdma/") || k.contains("sriov")).count();
                    assertEquals(1, rdmaResources, pod.describe() + " " + c.getName() + ": one RDMA resource");
                    Map<String, Quantity> requests = c.getResources().getRequests();
                    if (requests != null && requests.containsKey(resource)) {
                        assertEquals(limits.get(resource), requests.get(resource),
                                "extended resources: request = limit");
                    }
                }
            }
        }
    }

    @Test
    void everyContainerHasIpcLockAsRootAndNothingMore() {
        for (Pod pod : Manifests.pods(Manifests.all())) {
            assertNull(pod.template().getSpec().getHostNetwork(), pod.describe() + ": the RDMA network is net1");
            for (Container c : pod.allContainers()) {
                String where = pod.describe() + " " + c.getName();
                SecurityContext sc = c.getSecurityContext();
                assertNotNull(sc, where);
                assertEquals(List.of("IPC_LOCK"), sc.getCapabilities().getAdd(), where);
                assertEquals(List.of("ALL"), sc.getCapabilities().getDrop(), where);
                assertTrue(sc.getPrivileged() == null || !sc.getPrivileged(), where + ": not privileged");
                // a non-root user gets no effective capability from capabilities.add (no ambient capabilities)
                assertTrue(sc.getRunAsUser() == null || sc.getRunAsUser() == 0, where + ": root in the container");
                assertTrue(sc.getRunAsNonRoot() == null || !sc.getRunAsNonRoot(), where);
                assertTrue(pod.template().getSpec().getSecurityContext() == null
                        || pod.template().getSpec().getSecurityContext().getRunAsUser() == null, where);
            }
        }
    }

    @Test
    void javaRunsThroughTheEntrypointThatRaisesTheMemlockLimit() {
        for (Pod pod : Manifests.pods(Manifests.all())) {
            for (Container c : pod.allContainers()) {
                String where = pod.describe() + " " + c.getName();
                if (c.getCommand() == null || c.getCommand().isEmpty()) {
                    // the image's ENTRYPOINT (ImageTest: it raises the memlock limit, then runs java with args[0])
                    assertFalse(c.getArgs().isEmpty(), where + ": a main class as the first argument");
                } else {
                    assertFalse(c.getCommand().get(0).contains("java"), where + ": java without the entrypoint");
                    assertFalse(c.getCommand().get(0).equals(IMAGE_ENTRYPOINT), where);
                }
            }
        }
    }

    @Test
    void everyPodIsOnTheRdmaNetworkWithItsOwnAddress() {
        for (Path variant : Manifests.variants()) {
            String nadName = network(variant).getMetadata().getName();
            Set<String> ips = new HashSet<>();
            for (Pod pod : Manifests.pods(Manifests.in(variant))) {
                Map<String, Object> attachment = attachment(pod);
                assertEquals(nadName, attachment.get("name"), pod.describe());
                assertEquals("net1", attachment.get("interface"), pod.describe());
                String ip = address(pod);
                assertTrue(ips.add(ip), pod.describe() + ": address " + ip + " used twice");
                for (Container c : pod.allContainers()) {
                    boolean usesRdmaIp = c.getArgs() != null && c.getArgs().contains("@rdma-ip@");
                    if (usesRdmaIp) {
                        assertTrue(c.getEnv().stream().anyMatch(e -> e.getName().equals("RDMA_INTERFACE")
                                && "net1".equals(e.getValue())), pod.describe() + " " + c.getName()
                                + ": @rdma-ip@ needs RDMA_INTERFACE=net1");
                    }
                }
            }
            Map<?, ?> config = Manifests.fromJson(cniConfig(network(variant)), Map.class);
            assertEquals(nadName, config.get("name"), variant + ": the CNI config's name");
            String cni = Manifests.json(config);
            assertTrue(cni.contains("\"ips\":true"), variant + ": static IPAM taking the pods' ips: " + cni);
            if (variant.endsWith("sriov")) {
                assertTrue(cni.contains("\"type\":\"sriov\"") && cni.contains("\"type\":\"rdma\""), cni);
            } else {
                assertTrue(cni.contains("\"type\":\"macvlan\""), cni);
            }
        }
    }

    @Test
    void serverListensWhereItsProbesServiceAndClientLook() {
        for (Path variant : Manifests.variants()) {
            List<Manifest> ms = Manifests.in(variant);
            Pod server = Manifests.pods(ms).stream().filter(p -> p.manifest().resource() instanceof Deployment)
                    .findFirst().orElseThrow();
            Container c = server.template().getSpec().getContainers().get(0);
            assertEquals("org.nettyrdma.examples.echo.EchoServer", c.getArgs().get(0));
            assertEquals("@rdma-ip@", c.getArgs().get(1), "binds net1's address");
            String port = c.getArgs().get(2);
            assertEquals(Integer.valueOf(port), c.getPorts().get(0).getContainerPort());
            for (Probe probe : List.of(c.getReadinessProbe(), c.getLivenessProbe())) {
                assertNotNull(probe, variant + ": readiness and liveness probes");
                assertNull(probe.getTcpSocket(), "an RDMA listen is no TCP socket");
                assertEquals(List.of("/opt/netty-rdma/rdma-listening.sh", port), probe.getExec().getCommand());
            }
            Service service = (Service) ms.stream().filter(m -> m.resource() instanceof Service).findFirst()
                    .orElseThrow().resource();
            assertEquals("None", service.getSpec().getClusterIP(), "headless: kube-proxy carries no RDMA");
            assertEquals(server.template().getMetadata().getLabels().get("app.kubernetes.io/name"),
                    service.getSpec().getSelector().get("app.kubernetes.io/name"));
            ServicePort sp = service.getSpec().getPorts().get(0);
            assertEquals(Integer.valueOf(port), sp.getPort());
            assertEquals(c.getPorts().get(0).getName(), sp.getTargetPort().getStrVal());
            // the server's doctor checks the address it binds
            Container doctor = server.template().getSpec().getInitContainers().get(0);
            assertEquals(List.of("org.nettyrdma.tools.Main", "doctor", "--address", "@rdma-ip@"),
                    doctor.getArgs().subList(0, 4));

            Pod client = job(ms, "netty-rdma-echo-client");
            List<String> args = client.template().getSpec().getContainers().get(0).getArgs();
            assertEquals(List.of("org.nettyrdma.examples.echo.EchoClient", address(server), port), args);
        }
    }

    @Test
    void perftestReadsWithThirtyQueuePairsOverRdmaCm() {
        for (Path variant : Manifests.variants()) {
            List<Manifest> ms = Manifests.in(variant);
            Pod server = job(ms, "netty-rdma-perftest-server");
            Pod client = job(ms, "netty-rdma-perftest-client");
            List<String> serverCommand = server.template().getSpec().getContainers().get(0).getCommand();
            List<String> clientCommand = client.template().getSpec().getContainers().get(0).getCommand();
            for (List<String> command : List.of(serverCommand, clientCommand)) {
                assertEquals("ib_read_bw", command.get(0));
                int q = command.indexOf("-q");
                assertTrue(q > 0 && command.get(q + 1).equals("30"), command.toString());
                assertTrue(command.contains("-R"), "RDMA CM: " + command);
            }
            assertEquals(serverCommand, clientCommand.subList(0, clientCommand.size() - 1),
                    "the client runs the server's test");
            assertEquals(address(server), clientCommand.get(clientCommand.size() - 1));
            assertEquals("Never", client.template().getSpec().getRestartPolicy());
        }
    }

    /** The CNI configuration of a NetworkAttachmentDefinition: the JSON text of spec.config. */
    private static String cniConfig(GenericKubernetesResource nad) {
        Object spec = nad.getAdditionalProperties().get("spec");
        assertTrue(spec instanceof Map<?, ?>, nad.getMetadata().getName() + ": no spec");
        Object config = ((Map<?, ?>) spec).get("config");
        assertTrue(config instanceof String, nad.getMetadata().getName() + ": spec.config is not a string");
        return (String) config;
    }

    private static Pod job(List<Manifest> ms, String name) {
        return Manifests.pods(ms).stream().filter(p -> p.manifest().resource() instanceof Job
                && p.manifest().resource().getMetadata().getName().equals(name)).findFirst()
                .orElseThrow(() -> new AssertionError("no Job " + name));
    }

    /** The pod's only entry of the networks annotation. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> attachment(Pod pod) {
        String annotation = pod.template().getMetadata().getAnnotations().get(NETWORKS);
        assertNotNull(annotation, pod.describe() + ": " + NETWORKS);
        List<Object> list = Manifests.fromJson(annotation, List.class);
        assertEquals(1, list.size(), pod.describe());
        return (Map<String, Object>) list.get(0);
    }

    /** The pod's static address on the RDMA network, without the prefix length. */
    @SuppressWarnings("unchecked")
    private static String address(Pod pod) {
        List<String> ips = (List<String>) attachment(pod).get("ips");
        assertEquals(1, ips.size(), pod.describe());
        return ips.get(0).substring(0, ips.get(0).indexOf('/'));
    }
}
