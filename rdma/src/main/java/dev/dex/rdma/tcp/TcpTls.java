package dev.dex.rdma.tcp;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLException;
import javax.net.ssl.TrustManagerFactory;

import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.ssl.ClientAuth;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;

/**
 * Mutual TLS for the {@code tcp} fabric's connections, with the cluster's certificates (the key stores
 * {@code dex certs} makes): TLS 1.3, and on both ends a certificate of the cluster's CA is required, so only the
 * cluster's own nodes can read or write a memory node's region. Host names are not verified (a node is admitted
 * for its CA, as on the cluster's Artery connections). The handler goes first in each connection's pipeline; the
 * client's requests written before the handshake completes wait in it, and a failed handshake closes the
 * connection, which fails its verbs with {@link dev.dex.rdma.FabricException} naming the cause.
 *
 * <p>Concurrency: immutable; Netty's contexts are shared by all connections.
 */
public final class TcpTls {
    private final SslContext server;
    private final SslContext client;

    private TcpTls(SslContext server, SslContext client) {
        this.server = server;
        this.client = client;
    }

    /**
     * From PKCS12 stores: {@code keyStore} holds this node's key and certificate chain, {@code trustStore} the CA's
     * certificate; {@code password} opens both (and the key).
     */
    public static TcpTls fromStores(Path keyStore, Path trustStore, char[] password) {
        try {
            KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            keys.init(load(keyStore, password), password);
            TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            trust.init(load(trustStore, password));
            SslContext server = SslContextBuilder.forServer(keys).trustManager(trust).clientAuth(ClientAuth.REQUIRE)
                    .protocols("TLSv1.3").build();
            SslContext client = SslContextBuilder.forClient().keyManager(keys).trustManager(trust).protocols("TLSv1.3")
                    .endpointIdentificationAlgorithm(null).build();
            return new TcpTls(server, client);
        } catch (GeneralSecurityException | SSLException e) {
            throw new IllegalArgumentException("the tcp fabric's TLS cannot use " + keyStore + " and " + trustStore + ": " + e, e);
        }
    }

    private static KeyStore load(Path path, char[] password) throws GeneralSecurityException {
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(path)) {
            store.load(in, password);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the key store " + path + " (or its password is wrong)", e);
        }
        return store;
    }

    SslHandler serverHandler(ByteBufAllocator allocator) {
        return server.newHandler(allocator);
    }

    SslHandler clientHandler(ByteBufAllocator allocator, String host, int port) {
        return client.newHandler(allocator, host, port);
    }
}
