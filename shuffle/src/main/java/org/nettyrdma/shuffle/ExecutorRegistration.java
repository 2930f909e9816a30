package org.nettyrdma.shuffle;

import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.shuffle.protocol.RegisterExecutor;

/**
 * Registers an executor's shuffle files with a shuffle service, as an executor does when it starts (Spark's
 * {@code ExternalBlockStoreClient.registerWithShuffleServer}): a {@link RegisterExecutor} RPC carrying the executor's
 * {@code ExecutorShuffleInfo}, answered once the service knows where the files are.
 */
public final class ExecutorRegistration {
    private ExecutorRegistration() {
    }

    public static void register(TransportClient client, String appId, ShuffleLayout executor, long timeoutMs) {
        client.sendRpcSync(new RegisterExecutor(appId, executor.execId(), executor.info()).toByteBuffer(), timeoutMs);
    }
}
