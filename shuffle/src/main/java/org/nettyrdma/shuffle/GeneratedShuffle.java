package org.nettyrdma.shuffle;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * A {@link ShuffleSpec} written to disk in Spark's layout, spread over {@code executors} executors (ids {@code "0"},
 * {@code "1"}, ...; each with two local directories under {@code root}), with its {@link ShuffleManifest}.
 */
public record GeneratedShuffle(ShuffleSpec spec, List<ShuffleLayout> executors, ShuffleManifest manifest) {

    public static GeneratedShuffle write(File root, ShuffleSpec spec, int executors) throws IOException {
        List<ShuffleLayout> layouts = new ArrayList<>();
        for (int e = 0; e < executors; e++) {
            layouts.add(ShuffleLayout.create(root, Integer.toString(e), 2));
        }
        return new GeneratedShuffle(spec, List.copyOf(layouts), ShuffleWriter.write(spec, layouts));
    }

    /** The executors' ids, in order. */
    public List<String> execIds() {
        return executors.stream().map(ShuffleLayout::execId).toList();
    }
}
