package dev.dex.actors;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.dex.rdma.Fabric;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.shm.ShmFabric;

/**
 * The fabric a node uses, from configuration: {@code local} (regions in this JVM, shared by every actor
 * system of the JVM under one name, for the single-process demo and tests) or {@code shm} (memory-mapped
 * files in a directory, shared by the processes of one host).
 *
 * <p>Concurrency: the registry of local fabrics is a concurrent map; the fabrics are thread-safe.
 */
public final class Fabrics {
    private static final Map<String, LocalFabric> LOCAL = new ConcurrentHashMap<>();

    private Fabrics() {
    }

    /** Where and how nodes reach the memory pool. */
    public record Spec(String transport, String localName, Path shmDirectory, long latencyNs) {
        public Spec {
            if (!transport.equals("local") && !transport.equals("shm")) {
                throw new IllegalArgumentException("dex.fabric.transport must be local or shm: " + transport);
            }
            if (latencyNs < 0) {
                throw new IllegalArgumentException("dex.fabric.latency-ns must be >= 0: " + latencyNs);
            }
        }
    }

    /** The fabric for {@code spec}: the JVM-wide local fabric of that name, or an shm fabric on the directory. */
    public static Fabric open(Spec spec) {
        if (spec.transport().equals("local")) {
            return LOCAL.computeIfAbsent(spec.localName(), name -> new LocalFabric(spec.latencyNs()));
        }
        return new ShmFabric(spec.shmDirectory(), spec.latencyNs());
    }

    /** Forgets (and closes) the JVM-wide local fabric of that name; for tests and the demo's end. */
    public static void closeLocal(String name) {
        LocalFabric fabric = LOCAL.remove(name);
        if (fabric != null) {
            fabric.close();
        }
    }
}
