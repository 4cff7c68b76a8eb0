package dev.dex.actors.node;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.dex.rdma.Fabric;
import dev.dex.rdma.disni.DisniFabric;
import dev.dex.rdma.disni.DisniSettings;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.shm.ShmFabric;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.tcp.TcpSettings;
import dev.dex.rdma.tcp.TcpTls;

/**
 * The fabric a node uses, from configuration: {@code local} (regions in this JVM, shared by every actor
 * system of the JVM under one name, for the single-process demo and tests), {@code shm} (memory-mapped
 * files in a directory, shared by the processes of one host), {@code tcp} (a memory node serves its
 * region over TCP at an endpoint it advertises in its {@link MemoryNode.Description}; any host) or
 * {@code disni} (RDMA READ and WRITE through DiSNI, atomics over a tcp control fabric; hosts with RDMA NICs).
 * With {@link Spec#tls()}, the tcp fabric's connections (and disni's control connections) use mutual TLS.
 *
 * <p>Concurrency: the registry of local fabrics is a concurrent map; the fabrics are thread-safe.
 */
public final class Fabrics {
    private static final Map<String, LocalFabric> LOCAL = new ConcurrentHashMap<>();

    private Fabrics() {
    }

    /** Where and how nodes reach the memory pool. */
    public record Spec(String transport, String localName, Path shmDirectory, long latencyNs, TcpSettings tcp,
                       DisniSettings disni, Path tcpRegionDirectory, TcpTls tls, dev.dex.rdma.tcp.ReplicaSettings replication) {
        public Spec {
            replication = replication == null ? dev.dex.rdma.tcp.ReplicaSettings.DEFAULTS : replication;
            if (!transport.equals("local") && !transport.equals("shm") && !transport.equals("tcp") && !transport.equals("disni")) {
                throw new IllegalArgumentException("dex.fabric.transport must be local, shm, tcp or disni: " + transport);
            }
            if (latencyNs < 0) {
                throw new IllegalArgumentException("dex.fabric.latency-ns must be >= 0: " + latencyNs);
            }
        }

        /** A spec with the default replication settings. */
        public Spec(String transport, String localName, Path shmDirectory, long latencyNs, TcpSettings tcp,
                    DisniSettings disni, Path tcpRegionDirectory, TcpTls tls) {
            this(transport, localName, shmDirectory, latencyNs, tcp, disni, tcpRegionDirectory, tls, null);
        }

        /** A spec without TLS on the tcp fabric's connections. */
        public Spec(String transport, String localName, Path shmDirectory, long latencyNs, TcpSettings tcp,
                    DisniSettings disni, Path tcpRegionDirectory) {
            this(transport, localName, shmDirectory, latencyNs, tcp, disni, tcpRegionDirectory, null);
        }

        /** A spec whose tcp memory nodes keep their regions in their own memory. */
        public Spec(String transport, String localName, Path shmDirectory, long latencyNs, TcpSettings tcp,
                    DisniSettings disni) {
            this(transport, localName, shmDirectory, latencyNs, tcp, disni, null);
        }

        /** A spec with the default tcp and disni settings. */
        public Spec(String transport, String localName, Path shmDirectory, long latencyNs) {
            this(transport, localName, shmDirectory, latencyNs, TcpSettings.DEFAULTS, DisniSettings.DEFAULTS);
        }

        /**
         * The directory where memory nodes keep their regions across restarts ({@code shm}: the shm directory;
         * {@code tcp}: the region directory, when one is set), or null where a region ends with its process.
         */
        public Path keptRegions() {
            return switch (transport) {
                case "shm" -> shmDirectory;
                case "tcp" -> tcpRegionDirectory;
                default -> null;
            };
        }

        /** True when each node opens a fabric object of its own, which it must close when it stops. */
        public boolean perNode() {
            return !transport.equals("local");
        }
    }

    /**
     * The fabric for {@code spec}: the JVM-wide local fabric of that name, an shm fabric on the directory, a
     * new tcp fabric (its own event loops, closed by the caller), or a new disni fabric over a tcp control
     * fabric. Without a usable RDMA device, disni fails with {@link IllegalStateException} saying why.
     */
    public static Fabric open(Spec spec) {
        return switch (spec.transport()) {
            case "local" -> LOCAL.computeIfAbsent(spec.localName(), name -> {
                LocalFabric local = new LocalFabric(spec.latencyNs());
                local.copyRate(spec.replication().copyRate()); // replica groups of memory nodes in this JVM
                local.failoverWait(spec.replication().failoverWait());
                return local;
            });
            case "shm" -> new ShmFabric(spec.shmDirectory(), spec.latencyNs());
            case "tcp" -> new TcpFabric(spec.tcp(), spec.replication(), spec.latencyNs(), spec.tcpRegionDirectory(), spec.tls());
            default -> {
                TcpFabric control = new TcpFabric(spec.tcp(), spec.latencyNs(), null, spec.tls());
                try {
                    DisniFabric disni = new DisniFabric(control, spec.disni());
                    disni.replication(spec.replication()); // replica groups: beats, suspicion, copies, the failover wait
                    yield disni;
                } catch (RuntimeException noRdma) {
                    control.close();
                    throw noRdma;
                }
            }
        };
    }

    /**
     * The identity a compute node's fabric connections greet memory nodes with, and the one a memory node
     * fences when the cluster downs that node: its member's unique id (a new one with every start), never 0.
     * Both sides derive it from the cluster member, so it lives here rather than with either of them.
     */
    static long clientId(org.apache.pekko.cluster.UniqueAddress member) {
        long uid = member.longUid();
        return uid == 0 ? 1 : uid;
    }

    /**
     * Whether the member with unique id {@code uid} (a fabric client id: {@link Fabrics#clientId}) is in the cluster
     * this node sees: a member that was removed never comes back under the same unique id. Read on engine threads.
     */
    static boolean isMember(org.apache.pekko.cluster.typed.Cluster cluster, long uid) {
        for (org.apache.pekko.cluster.Member member : cluster.state().getMembers()) {
            if (clientId(member.uniqueAddress()) == uid) {
                return true;
            }
        }
        return false;
    }

    /** Forgets (and closes) the JVM-wide local fabric of that name; for tests and the demo's end. */
    public static void closeLocal(String name) {
        LocalFabric fabric = LOCAL.remove(name);
        if (fabric != null) {
            fabric.close();
        }
    }
}
