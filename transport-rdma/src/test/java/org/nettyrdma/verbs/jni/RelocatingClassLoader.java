package org.nettyrdma.verbs.jni;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.MalformedURLException;
import java.net.URL;
import java.nio.file.Path;
import java.util.Collections;
import java.util.Enumeration;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a shading plugin does, at class-loading time, for tests: serves the classes of {@code io.netty} and
 * {@code org.nettyrdma} under a package prefix ({@code com.acme.shaded.org.nettyrdma...}), every class name and string
 * in their constant pools relocated alike, and extra resources (the renamed native library) from files.
 */
final class RelocatingClassLoader extends ClassLoader {
    private static final Pattern PACKAGES = Pattern.compile("io/netty/|org/nettyrdma/|io\\.netty\\.|org\\.nettyrdma\\.");

    private final String prefix;
    private final Map<String, Path> resources;

    /**
     * @param prefix    the package prefix, dotted and ending with a dot ({@code com.acme.shaded.})
     * @param resources extra resources: name → file
     */
    RelocatingClassLoader(String prefix, Map<String, Path> resources, ClassLoader parent) {
        super(parent);
        this.prefix = prefix;
        this.resources = resources;
    }

    @Override
    protected Class<?> findClass(String name) throws ClassNotFoundException {
        if (!name.startsWith(prefix)) {
            throw new ClassNotFoundException(name);
        }
        String original = name.substring(prefix.length()).replace('.', '/') + ".class";
        try (InputStream in = getParent().getResourceAsStream(original)) {
            if (in == null) {
                throw new ClassNotFoundException(name);
            }
            byte[] bytes = relocate(in.readAllBytes());
            return defineClass(name, bytes, 0, bytes.length);
        } catch (IOException e) {
            throw new ClassNotFoundException(name, e);
        }
    }

    @Override
    protected URL findResource(String name) {
        Path p = resources.get(name);
        try {
            return p == null ? null : p.toUri().toURL();
        } catch (MalformedURLException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    protected Enumeration<URL> findResources(String name) {
        URL url = findResource(name);
        return url == null ? Collections.emptyEnumeration() : Collections.enumeration(java.util.List.of(url));
    }

    /** A constant pool entry's text, relocated: slashed and dotted names of the relocated packages. */
    private String relocate(String s) {
        return PACKAGES.matcher(s).replaceAll(m -> Matcher.quoteReplacement(
                (m.group().indexOf('/') >= 0 ? prefix.replace('.', '/') : prefix) + m.group()));
    }

    /** The class file with every UTF-8 constant relocated (the rest refers to constants by index: unchanged). */
    private byte[] relocate(byte[] classFile) throws IOException {
        DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(classFile));
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(classFile.length + 1024);
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(in.readInt()); // magic
        out.writeInt(in.readInt()); // minor, major
        int count = in.readUnsignedShort();
        out.writeShort(count);
        for (int i = 1; i < count; i++) {
            int tag = in.readUnsignedByte();
            out.writeByte(tag);
            switch (tag) {
                case 1: // Utf8
                    out.writeUTF(relocate(in.readUTF()));
                    break;
                case 7: case 8: case 16: case 19: case 20: // Class, String, MethodType, Module, Package
                    out.writeShort(in.readUnsignedShort());
                    break;
                case 15: // MethodHandle
                    out.writeByte(in.readUnsignedByte());
                    out.writeShort(in.readUnsignedShort());
                    break;
                case 3: case 4: case 9: case 10: case 11: case 12: case 17: case 18:
                    out.writeInt(in.readInt());
                    break;
                case 5: case 6: // Long, Double: two entries
                    out.writeLong(in.readLong());
                    i++;
                    break;
                default:
                    throw new IOException("constant pool tag " + tag);
            }
        }
        in.transferTo(out);
        out.flush();
        return bytes.toByteArray();
    }
}
