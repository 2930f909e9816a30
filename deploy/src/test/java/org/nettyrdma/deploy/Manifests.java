package org.nettyrdma.deploy;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodTemplateSpec;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The manifests under deploy/kubernetes/, each YAML document parsed into the Kubernetes model (fabric8): Deployment,
 * Service, Job as their classes, a NetworkAttachmentDefinition (a custom resource of Multus) as a generic resource.
 */
final class Manifests {
    static final Path KUBERNETES = Paths.get("kubernetes");
    static final Path DOCKER = Paths.get("docker");
    private static final KubernetesSerialization SERIALIZATION = new KubernetesSerialization();

    /** One document: the file it came from and the resource. */
    record Manifest(Path file, HasMetadata resource) {
        Path variant() {
            return file.getParent();
        }

        String describe() {
            return file + ": " + resource.getKind() + " " + resource.getMetadata().getName();
        }
    }

    /** One pod template of a Deployment or a Job, with where it is. */
    record Pod(Manifest manifest, PodTemplateSpec template) {
        List<Container> allContainers() {
            List<Container> all = new ArrayList<>(template.getSpec().getInitContainers());
            all.addAll(template.getSpec().getContainers());
            return all;
        }

        String describe() {
            return manifest.describe();
        }
    }

    private Manifests() {
    }

    static List<Path> files() {
        try (Stream<Path> s = Files.walk(KUBERNETES)) {
            return s.filter(p -> p.toString().endsWith(".yaml") || p.toString().endsWith(".yml")).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static List<Path> variants() {
        return files().stream().map(Path::getParent).distinct().toList();
    }

    static List<Manifest> all() {
        List<Manifest> all = new ArrayList<>();
        for (Path file : files()) {
            for (String doc : documents(file)) {
                Object parsed = SERIALIZATION.unmarshal(doc);
                if (!(parsed instanceof HasMetadata resource)) {
                    throw new AssertionError(file + ": not a Kubernetes resource: " + parsed);
                }
                all.add(new Manifest(file, resource));
            }
        }
        return all;
    }

    static List<Manifest> in(Path variant) {
        return all().stream().filter(m -> m.variant().equals(variant)).toList();
    }

    static List<Pod> pods(List<Manifest> manifests) {
        List<Pod> pods = new ArrayList<>();
        for (Manifest m : manifests) {
            if (m.resource() instanceof Deployment d) {
                pods.add(new Pod(m, d.getSpec().getTemplate()));
            } else if (m.resource() instanceof Job j) {
                pods.add(new Pod(m, j.getSpec().getTemplate()));
            }
        }
        return pods;
    }

    /** The NetworkAttachmentDefinitions, by name. */
    static Map<String, GenericKubernetesResource> networks(List<Manifest> manifests) {
        Map<String, GenericKubernetesResource> nads = new java.util.HashMap<>();
        for (Manifest m : manifests) {
            if (m.resource() instanceof GenericKubernetesResource g
                    && "NetworkAttachmentDefinition".equals(g.getKind())) {
                nads.put(g.getMetadata().getName(), g);
            }
        }
        return nads;
    }

    /** The YAML documents of a file (separated by lines of "---"), those with content only. */
    static List<String> documents(Path file) {
        String text;
        try {
            text = Files.readString(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<String> docs = new ArrayList<>();
        for (String doc : text.split("(?m)^---\\s*$")) {
            boolean content = doc.lines().anyMatch(l -> !l.isBlank() && !l.stripLeading().startsWith("#"));
            if (content) {
                docs.add(doc);
            }
        }
        return docs;
    }

    static String json(Object value) {
        return SERIALIZATION.asJson(value);
    }

    static <T> T fromJson(String json, Class<T> type) {
        return SERIALIZATION.unmarshal(json, type);
    }
}
