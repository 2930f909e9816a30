package org.nettyrdma.deploy;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import org.junit.jupiter.api.Test;
import org.nettyrdma.deploy.Manifests.Manifest;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every manifest parses into the Kubernetes model, with no field the model does not know; each variant is complete. */
class ManifestModelTest {

    @Test
    void everyDocumentParsesIntoAKnownKind() {
        List<Manifest> all = Manifests.all();
        assertFalse(all.isEmpty(), "no manifests under " + Manifests.KUBERNETES.toAbsolutePath());
        for (Manifest m : all) {
            assertTrue(m.resource().getMetadata() != null && m.resource().getMetadata().getName() != null,
                    m.file() + ": a resource without a name");
            boolean known = m.resource() instanceof Deployment || m.resource() instanceof Service
                    || m.resource() instanceof Job || m.resource() instanceof GenericKubernetesResource g
                    && "NetworkAttachmentDefinition".equals(g.getKind())
                    && "k8s.cni.cncf.io/v1".equals(g.getApiVersion());
            assertTrue(known, m.describe() + ": " + m.resource().getClass().getSimpleName());
        }
    }

    @Test
    void noFieldTheModelDoesNotKnow() {
        for (Manifest m : Manifests.all()) {
            if (m.resource() instanceof GenericKubernetesResource) {
                continue; // a custom resource: all its fields are "unknown" to the model; checked in RdmaPodTest
            }
            List<String> unknown = new ArrayList<>();
            collectUnknown(m.resource(), m.resource().getKind(), unknown);
            assertEquals(List.of(), unknown, m.describe() + ": fields the Kubernetes model does not know (typos?)");
        }
    }

    @Test
    void eachVariantHasServerServiceClientPerftestAndNetwork() {
        List<Path> variants = Manifests.variants();
        assertEquals(List.of("shared-device", "sriov"), variants.stream().map(p -> p.getFileName().toString())
                .sorted().toList());
        for (Path variant : variants) {
            List<Manifest> ms = Manifests.in(variant);
            assertEquals(1, count(ms, Deployment.class), variant + ": one server Deployment");
            assertEquals(1, count(ms, Service.class), variant + ": one Service");
            assertEquals(3, count(ms, Job.class), variant + ": the client Job and the perftest server and client Jobs");
            assertEquals(1, Manifests.networks(ms).size(), variant + ": one NetworkAttachmentDefinition");
        }
    }

    private static long count(List<Manifest> ms, Class<?> kind) {
        return ms.stream().filter(m -> kind.isInstance(m.resource())).count();
    }

    /** Walks the model's getters; every object's additionalProperties (what the model did not map) must be empty. */
    private static void collectUnknown(Object node, String path, List<String> unknown) {
        if (node == null) {
            return;
        }
        if (node instanceof Collection<?> c) {
            int i = 0;
            for (Object o : c) {
                collectUnknown(o, path + "[" + i++ + "]", unknown);
            }
            return;
        }
        if (node instanceof Map<?, ?> map) {
            for (Map.Entry<?, ?> e : map.entrySet()) {
                collectUnknown(e.getValue(), path + "." + e.getKey(), unknown);
            }
            return;
        }
        if (!node.getClass().getName().startsWith("io.fabric8.kubernetes.api.model")) {
            return;
        }
        for (Method getter : node.getClass().getMethods()) {
            if (getter.getParameterCount() != 0 || Modifier.isStatic(getter.getModifiers())
                    || !getter.getName().startsWith("get") || getter.getName().equals("getClass")) {
                continue;
            }
            Object value;
            try {
                value = getter.invoke(node);
            } catch (ReflectiveOperationException e) {
                throw new AssertionError(path + "." + getter.getName(), e);
            }
            if (getter.getName().equals("getAdditionalProperties")) {
                if (value instanceof Map<?, ?> extra && !extra.isEmpty()) {
                    unknown.add(path + ": " + extra.keySet());
                }
            } else {
                collectUnknown(value, path + "." + getter.getName().substring(3), unknown);
            }
        }
    }
}
