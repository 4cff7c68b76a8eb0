package dev.dex.cluster;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.server.Directives;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.management.javadsl.PekkoManagement;

import com.typesafe.config.Config;

import dev.dex.actors.DexMetrics;

/**
 * A node's HTTP endpoint for operators ({@code docs/operations.md}): Pekko Management's routes (the cluster's members
 * and shard regions, {@code /alive} and {@code /ready}) and {@code /metrics} in the Prometheus text format
 * ({@link DexMetrics}), on one port, at the node's host ({@code dex.node.host}, the loopback address by default).
 * Off when {@code dex.management.enabled} is off; {@code dex.management.port} 0 takes a free port, which the node
 * logs.
 *
 * <p>Concurrency: the binding is made once, on the caller's thread; requests are served by pekko-http on the
 * node's dispatcher, and a scrape only reads counters.
 */
final class OperatorEndpoint {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(OperatorEndpoint.class);

    private OperatorEndpoint() {
    }

    /**
     * Starts {@code system}'s endpoint as {@code config} says; returns where it listens, or null when it is off.
     *
     * @throws IllegalStateException when the port cannot be bound (in use, not permitted) within 30 s
     */
    static InetSocketAddress start(ActorSystem<?> system, Config config) {
        if (!config.getBoolean("dex.management.enabled")) {
            return null;
        }
        String host = config.getString("pekko.remote.artery.canonical.hostname");
        int port = config.getInt("dex.management.port");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("dex.management.port must be in [0, 65535]: " + port);
        }
        DexMetrics metrics = DexMetrics.get(system);
        Route scrape = Directives.path("metrics", () -> Directives.get(() -> Directives.complete(
                HttpEntities.create(ContentTypes.TEXT_PLAIN_UTF8, metrics.scrape()))));
        Route management = PekkoManagement.get(Adapter.toClassic(system)).getRoutes();
        try {
            ServerBinding binding = Http.get(system).newServerAt(host, port).bind(Directives.concat(scrape, management))
                    .toCompletableFuture().get(30, TimeUnit.SECONDS);
            system.getWhenTerminated().thenRun(() -> binding.unbind());
            InetSocketAddress bound = binding.localAddress();
            LOG.info("operator endpoint (members, shards, /alive, /ready, /metrics) at http://{}:{}", host, bound.getPort());
            return bound;
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new IllegalStateException("the operator endpoint could not listen at " + host + ":" + port + ": "
                    + (e.getCause() != null ? e.getCause() : e), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the operator endpoint started", e);
        }
    }
}
