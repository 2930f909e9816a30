package org.nettyrdma.shuffle;

import org.apache.spark.network.sasl.SecretKeyHolder;

/**
 * The secret of {@code spark.authenticate}, shared by the application's executors and the shuffle service: Spark uses
 * the application's id as the SASL user name and one secret per application ({@code ShuffleSecretManager} on the
 * service side); here one secret for every application.
 */
public final class SharedSecret implements SecretKeyHolder {
    private final String secret;

    public SharedSecret(String secret) {
        this.secret = secret;
    }

    @Override
    public String getSaslUser(String appId) {
        return appId;
    }

    @Override
    public String getSecretKey(String appId) {
        return secret;
    }
}
