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
 * ({@link DexMetrics}), on one port at {@code dex.management.hostname} (the loopback address by default, whatever
 * the cluster's host: the endpoint has no authentication). Off when {@code dex.management.enabled} is off;
 * {@code dex.management.port} 0 takes a free port, which the node logs. A node whose endpoint cannot listen logs
 * why and runs without it.
 *
 * <p>Concurrency: the binding is made once, on the caller's thread; requests are served by pekko-http on the
 * node's dispatcher, and a scrape only reads counters.
 */
final class OperatorEndpoint {
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(OperatorEndpoint.class);

    private OperatorEndpoint() {
    }

    /**
     * Starts {@code system}'s endpoint as {@code config} says; returns where it listens, or null when it is off or
     * could not listen (a port in use, an address not of this host: logged as a warning).
     *
     * @throws IllegalArgumentException for a port outside [0, 65535]
     */
    static InetSocketAddress start(ActorSystem<?> system, Config config) {
        if (!config.getBoolean("dex.management.enabled")) {
            return null;
        }
        String host = config.getString("dex.management.hostname");
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
            binding.addToCoordinatedShutdown(java.time.Duration.ofSeconds(3), system);
            InetSocketAddress bound = binding.localAddress();
            LOG.info("operator endpoint (members, shards, /alive, /ready, /metrics) at http://{}:{}", host, bound.getPort());
            return bound;
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            LOG.warn("the operator endpoint could not listen at {}:{} ({}); the node runs without it (dex.management.*)", host,
                    port, e.getCause() != null ? e.getCause() : e);
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
