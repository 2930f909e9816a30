package org.nettyrdma.shuffle;

import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;

import java.io.File;
import java.util.HashMap;
import java.util.Map;

/**
 * The {@link TransportConf} of Spark's shuffle module ({@code spark.shuffle.*} keys) for a {@link Security} choice,
 * with the same keys a Spark deployment sets in its configuration. Everything else stays at Spark's defaults unless
 * {@link #set} changes it.
 */
public final class SparkNetworkConf {
    /** Spark's module name for the shuffle service's transport settings: its keys are {@code spark.shuffle.io.*}. */
    public static final String MODULE = "shuffle";

    private final Map<String, String> settings = new HashMap<>();

    private SparkNetworkConf() {
    }

    /** Spark's defaults, secured as {@code security} says; {@link Security#TLS} needs {@link #tls} too. */
    public static SparkNetworkConf of(Security security) {
        SparkNetworkConf c = new SparkNetworkConf();
        switch (security) {
            case NONE:
                break;
            case TLS:
                c.set("spark.ssl.rpc.enabled", "true");
                break;
            case SASL:
                c.set("spark.authenticate", "true");
                break;
            case SASL_ENCRYPTION:
                c.set("spark.authenticate", "true").set("spark.authenticate.enableSaslEncryption", "true")
                        .set("spark.network.sasl.serverAlwaysEncrypt", "true");
                break;
            case AES_ENCRYPTION:
                c.set("spark.authenticate", "true").set("spark.network.crypto.enabled", "true")
                        .set("spark.network.crypto.saslFallback", "false");
                break;
            default:
                throw new AssertionError(security);
        }
        return c;
    }

    /** The key store (PKCS12, with the key and its certificate) and trust store of {@code spark.ssl.rpc.*}. */
    public SparkNetworkConf tls(File keyStore, File trustStore, String password) {
        return set("spark.ssl.rpc.keyStore", keyStore.getAbsolutePath())
                .set("spark.ssl.rpc.keyStorePassword", password)
                .set("spark.ssl.rpc.keyPassword", password)
                .set("spark.ssl.rpc.trustStore", trustStore.getAbsolutePath())
                .set("spark.ssl.rpc.trustStorePassword", password);
    }

    public SparkNetworkConf set(String key, String value) {
        settings.put(key, value);
        return this;
    }

    /** The settings made so far (Spark's keys and values). */
    public Map<String, String> settings() {
        return Map.copyOf(settings);
    }

    public TransportConf build() {
        return new TransportConf(MODULE, new MapConfigProvider(settings));
    }
}
