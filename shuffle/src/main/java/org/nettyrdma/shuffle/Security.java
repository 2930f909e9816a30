package org.nettyrdma.shuffle;

/**
 * How a connection of Spark's shuffle protocol is secured, as a Spark deployment configures it: the settings each
 * choice puts into the {@code TransportConf} ({@link SparkNetworkConf}) and the bootstraps the server and the client
 * run ({@link BlockServer}, {@link BlockClientFactory}).
 */
public enum Security {
    /** Spark's defaults: no authentication, no encryption. */
    NONE(false),
    /** {@code spark.ssl.rpc.enabled}: TLS under Spark's pipeline ({@code SslHandler}, {@code SslMessageEncoder}). */
    TLS(false),
    /** {@code spark.authenticate}: SASL DIGEST-MD5 authentication, no encryption. */
    SASL(true),
    /** {@code spark.authenticate} and {@code spark.authenticate.enableSaslEncryption}: SASL with auth-conf QOP. */
    SASL_ENCRYPTION(true),
    /** {@code spark.authenticate} and {@code spark.network.crypto.enabled}: Spark's AES-based authentication and
     * encryption ({@code AuthEngine}, {@code TransportCipher}). */
    AES_ENCRYPTION(true);

    private final boolean authenticates;

    Security(boolean authenticates) {
        this.authenticates = authenticates;
    }

    /** Whether the server and client run Spark's authentication bootstraps (and need a shared secret). */
    public boolean authenticates() {
        return authenticates;
    }
}
