package dev.dex.cluster;

import java.nio.file.Path;
import java.time.Duration;

import com.typesafe.config.Config;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.node.Backoff;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.node.Fabrics;
import dev.dex.actors.node.MemoryNode;
import dev.dex.actors.partition.LeaveDrain;
import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.EngineMode;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.disni.DisniSettings;
import dev.dex.rdma.tcp.TcpSettings;

/**
 * The {@code dex} settings of {@code reference.conf}, read once and checked; a bad value fails with a
 * message naming its key, and so does a key under {@code dex} that no reference.conf names.
 */
public record DexSettings(Fabrics.Spec fabric, MemoryNode.Settings memory, ComputeNode.Settings compute,
                          Duration batchTimeout, int clientWindow, Duration requestTimeout, long demoKeys, int demoSeconds, int demoInFlight,
                          String demoWorkload) {

    /**
     * The keys under {@code dex} of every reference.conf on the class path, merged: the settings there are. Not from
     * ConfigFactory.defaultReference(), which lays the JVM's system properties over them.
     */
    private static final java.util.Set<String> KNOWN = knownKeys();

    private static java.util.Set<String> knownKeys() {
        java.util.Set<String> keys = new java.util.TreeSet<>();
        for (var entry : com.typesafe.config.ConfigFactory.parseResources("reference.conf").resolve().getConfig("dex").entrySet()) {
            keys.add(entry.getKey());
        }
        return java.util.Collections.unmodifiableSet(keys);
    }

    public static DexSettings from(Config config) {
        Config dex = config.getConfig("dex");
        checkKnown(dex);
        TcpSettings tcp = TcpSettings.fromConfig(dex.getConfig("fabric.tcp"));
        // Checked only where used: a wildcard --host suits a tcp node's bind address but could not be advertised over RDMA.
        DisniSettings disni = !dex.getString("fabric.transport").equals("disni") ? DisniSettings.DEFAULTS
                : DisniSettings.fromConfig(dex.getConfig("fabric.disni"));
        int replicas = (int) range(dex, "memory.replicas", dex.getInt("memory.replicas"), 1, 3);
        dev.dex.rdma.tcp.ReplicaSettings replication = dev.dex.rdma.tcp.ReplicaSettings.fromConfig(dex.getConfig("fabric.tcp.replication"))
                .withCopyRate(dex.getBytes("memory.copy-rate"));
        if (replicas == 1) {
            replication = replication.withFailoverWait(java.time.Duration.ZERO); // no group: no new primary to wait for
        }
        if (replicas > 1 && dex.getString("fabric.transport").equals("local") && dex.getString("compute.mode").equals("offload-only")) {
            // Compute nodes write every replica themselves there; an offload would change the primary's region alone.
            throw new IllegalArgumentException("dex.compute.mode = offload-only cannot run with dex.memory.replicas = " + replicas
                    + " on the local fabric: its compute nodes write every replica themselves, and offloads are not replicated");
        }
        Fabrics.Spec fabric = new Fabrics.Spec(dex.getString("fabric.transport"), dex.getString("fabric.local-name"),
                Path.of(dex.getString("fabric.shm-directory")), dex.getLong("fabric.latency-ns"), tcp, disni,
                dex.getString("fabric.tcp.region-directory").isEmpty() ? null : Path.of(dex.getString("fabric.tcp.region-directory")),
                fabricTls(dex), replication);

        long regionSize = dex.getBytes("memory.region-size");
        long chunkSize = dex.getBytes("memory.chunk-size");
        if (Long.bitCount(chunkSize) != 1 || regionSize % chunkSize != 0 || regionSize < 2 * chunkSize) {
            throw new IllegalArgumentException("dex.memory.region-size (" + regionSize + ") must be a multiple of"
                    + " dex.memory.chunk-size (" + chunkSize + ", a power of two) holding at least two chunks");
        }
        TreeSettings tree = TreeSettings.fromConfig(dex.getConfig("tree"));
        int partitions = dex.getInt("tree.partitions");
        if (partitions <= PartitionTable.MAX_PARTITIONS && partitions > PartitionTable.maxPartitions(chunkSize)) {
            throw new IllegalArgumentException("dex.tree.partitions (" + partitions + ") do not fit the superblock in chunks of "
                    + chunkSize + " bytes, which hold " + PartitionTable.maxPartitions(chunkSize) + "; raise dex.memory.chunk-size"
                    + " (16 KiB or more holds " + PartitionTable.MAX_PARTITIONS + ")");
        }
        PartitionTable table = PartitionTable.equalWidth(partitions, dex.getLong("tree.partition-key-min"),
                dex.getLong("tree.partition-key-max"));
        MemoryNode.Settings memory = new MemoryNode.Settings(
                range(dex, "memory.server-id", dex.getInt("memory.server-id"), 0, 32767),
                dex.getBytes("memory.region-size"),
                (int) range(dex, "memory.chunk-size", dex.getBytes("memory.chunk-size"), 4096, 1 << 30),
                range(dex, "memory.offload-threads", dex.getInt("memory.offload-threads"), 1, 1024),
                range(dex, "memory.offload-queue", dex.getInt("memory.offload-queue"), 1, 1 << 20),
                table,
                tree.subtreeLevel(), dex.getBoolean("memory.format"), tree.keyFormat().bytes(), replicas);

        DexEngineSettings engine = DexEngineSettings.fromConfig(dex.getConfig("compute"));
        // Read by the shard coordinator's strategy where it starts; checked here, where a bad value stops the node at once.
        dev.dex.actors.partition.ProbedRebalance.RoundLimit.of(config);
        // Read by the compute node where its workers start; its windows close on its health tick, every second.
        if (dex.getDuration("compute.load-window").compareTo(Duration.ofSeconds(1)) < 0) {
            throw new IllegalArgumentException("dex.compute.load-window must be at least 1s (a compute node closes its"
                    + " windows on its health tick, every second): " + dex.getDuration("compute.load-window"));
        }
        ComputeNode.Settings compute = new ComputeNode.Settings(
                range(dex, "compute.memory-nodes", dex.getInt("compute.memory-nodes"), 1, 32768), engine,
                range(dex, "compute.worker-threads", dex.getInt("compute.worker-threads"), 1, 1024),
                dex.getDuration("compute.offload.timeout"), positive(dex, "compute.handshake.describe-timeout"),
                Backoff.fromConfig(dex.getConfig("compute.handshake")), RedoLogSettings.fromConfig(dex.getConfig("compute")),
                positive(dex, "compute.checkpoint-interval"),
                probeTimeout(config), positive(dex, "compute.write-back-timeout"), replicas, leave(config), mergeSweep(config));
        return new DexSettings(fabric, memory, compute, dex.getDuration("client.batch-timeout"),
                (int) range(dex, "client.window", dex.getInt("client.window"), 1, DexClient.MAX_WINDOW),
                dex.getDuration("client.request-timeout"), range(dex, "demo.keys", dex.getLong("demo.keys"), 1, 1L << 40),
                range(dex, "demo.seconds", dex.getInt("demo.seconds"), 1, 3600),
                range(dex, "demo.in-flight", dex.getInt("demo.in-flight"), 1, 100_000), dex.getString("demo.workload"));
    }

    /**
     * dex.compute.leave: the handoff group (0 to 1024) and the drain timeout, which must leave 3 s of the first
     * shutdown phase's timeout ({@code pekko.coordinated-shutdown.phases.before-service-unbind.timeout}, where it is set)
     * for the router's acknowledgement and a poll: a phase that times out is cut short.
     */
    private static LeaveDrain.Settings leave(Config config) {
        Config dex = config.getConfig("dex");
        int group = (int) range(dex, "compute.leave.handoff-group", dex.getInt("compute.leave.handoff-group"), 0, 1024);
        Duration timeout = positive(dex, "compute.leave.drain-timeout");
        String phase = "pekko.coordinated-shutdown.phases.before-service-unbind.timeout";
        // Checked where the phase's timeout is set (dex-cluster.conf sets it); elsewhere the drain is fitted to the
        // phase when the node starts, with a warning (LeaveDrain.onShutdown).
        Duration phaseTimeout = config.hasPath(phase) ? config.getDuration(phase) : null;
        if (phaseTimeout != null && timeout.plus(LeaveDrain.ROUTER_ROOM).compareTo(phaseTimeout) > 0) {
            throw new IllegalArgumentException("dex.compute.leave.drain-timeout (" + timeout.toMillis() + " ms) must be at least "
                    + LeaveDrain.ROUTER_ROOM.toSeconds() + " s under " + phase + " (" + phaseTimeout.toMillis() + " ms): raise that too");
        }
        return new LeaveDrain.Settings(group, timeout);
    }

    /** dex.compute.merge-sweep: off (zero), or positive. */
    private static Duration mergeSweep(Config config) {
        if ("off".equals(config.getValue("dex.compute.merge-sweep").unwrapped())) {
            return Duration.ZERO;
        }
        return positive(config.getConfig("dex"), "compute.merge-sweep");
    }

    /** dex.compute.rebalance-probe-timeout: off (zero), or positive and under half of sharding's rebalance interval. */
    private static Duration probeTimeout(Config config) {
        if ("off".equals(config.getValue("dex.compute.rebalance-probe-timeout").unwrapped())) {
            return Duration.ZERO;
        }
        Duration timeout = positive(config.getConfig("dex"), "compute.rebalance-probe-timeout");
        Duration interval = config.getDuration("pekko.cluster.sharding.rebalance-interval");
        if (timeout.multipliedBy(2).compareTo(interval) >= 0) {
            throw new IllegalArgumentException("dex.compute.rebalance-probe-timeout (" + timeout.toMillis() + " ms) must be under"
                    + " half of pekko.cluster.sharding.rebalance-interval (" + interval.toMillis() + " ms)");
        }
        return timeout;
    }

    /**
     * Fails on a key under {@code dex} that the modules' reference.conf ({@link #KNOWN}) do not name: a misspelt
     * setting would otherwise be ignored and its default used without a word. The message suggests the nearest
     * known key. Keys set as JVM system properties are not checked: tools set {@code dex.*} properties of their own.
     */
    static void checkKnown(Config dex) {
        java.util.List<String> unknown = new java.util.ArrayList<>();
        dex.entrySet().forEach(entry -> {
            // A JVM system property is no setting of ours unless reference.conf names it: the tools set their own
            // (-Ddex.progress by bin/dex, -Ddex.lincheck.scale by the tests), so only files and --set are checked.
            if (!KNOWN.contains(entry.getKey()) && !entry.getValue().origin().description().contains("system properties")) {
                unknown.add(entry.getKey());
            }
        });
        if (unknown.isEmpty()) {
            return;
        }
        java.util.Collections.sort(unknown);
        StringBuilder message = new StringBuilder(unknown.size() == 1 ? "unknown setting" : "unknown settings");
        for (String key : unknown) {
            message.append(key.equals(unknown.get(0)) ? " " : ", ").append("dex.").append(key);
            String near = nearest(key, KNOWN);
            if (near != null) {
                message.append(" (did you mean dex.").append(near).append("?)");
            }
        }
        throw new IllegalArgumentException(message.append("; the modules' reference.conf name every dex setting (README.md, Configuration)").toString());
    }

    /**
     * The known key nearest to {@code key}: of those with the same last name (a setting put under the wrong section),
     * the one fewest single-character edits away; else the nearest of all, if at most a third of the key's length
     * away; null if none is near.
     */
    static String nearest(String key, java.util.Set<String> known) {
        String name = key.substring(key.lastIndexOf('.') + 1);
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        String sameName = null;
        int sameNameDistance = Integer.MAX_VALUE;
        for (String candidate : known) {
            int distance = editDistance(key, candidate);
            if (candidate.substring(candidate.lastIndexOf('.') + 1).equals(name) && distance < sameNameDistance) {
                sameName = candidate;
                sameNameDistance = distance;
            }
            if (distance < bestDistance) {
                best = candidate;
                bestDistance = distance;
            }
        }
        if (sameName != null) {
            return sameName;
        }
        return bestDistance <= Math.max(1, key.length() / 3) ? best : null;
    }

    /** Levenshtein's distance: the fewest insertions, deletions and substitutions that turn {@code a} into {@code b}. */
    static int editDistance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }

    private static Duration positive(Config dex, String key) {
        Duration value = dex.getDuration(key);
        if (value.isNegative() || value.isZero()) {
            throw new IllegalArgumentException("dex." + key + " must be positive: " + value);
        }
        return value;
    }

    private static int range(Config dex, String key, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException("dex." + key + " must be in [" + min + ", " + max + "]: " + value);
        }
        return value;
    }

    /**
     * The tcp fabric's mutual TLS when {@code dex.security.tls} is on and the fabric has tcp connections (tcp, and
     * disni's control connections): the cluster's certificates, as Artery uses them; null otherwise.
     */
    private static dev.dex.rdma.tcp.TcpTls fabricTls(Config dex) {
        String transport = dex.getString("fabric.transport");
        if (!dex.getBoolean("security.tls") || !(transport.equals("tcp") || transport.equals("disni"))) {
            return null;
        }
        for (String key : new String[] {"security.key-store", "security.trust-store", "security.password-file"}) {
            if (dex.getString(key).isBlank()) {
                throw new IllegalArgumentException("dex.security.tls is on but dex." + key + " is not set (bin/dex certs makes the"
                        + " files; --tls DIR/NAME.p12 sets them)");
            }
        }
        return dev.dex.rdma.tcp.TcpTls.fromStores(Path.of(dex.getString("security.key-store")),
                Path.of(dex.getString("security.trust-store")),
                Certs.readPassword(Path.of(dex.getString("security.password-file"))).toCharArray());
    }

    private static long range(Config dex, String key, long value, long min, long max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException("dex." + key + " must be in [" + min + ", " + max + "]: " + value);
        }
        return value;
    }
}
