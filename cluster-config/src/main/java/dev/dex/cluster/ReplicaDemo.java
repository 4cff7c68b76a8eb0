package dev.dex.cluster;

import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.apache.pekko.actor.typed.ActorSystem;

import com.typesafe.config.Config;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.client.DexClientApi;
import dev.dex.actors.node.MemoryNode;
import me.tongfei.progressbar.ProgressBar;

/**
 * {@code bin/dex demo --replicas R --kill-memory-node} (docs/replication.md): a memory server held by R memory nodes over
 * tcp, each an actor system of this JVM with a fabric of its own. The keys are written through the client (the group's
 * primary serves clients only once the coordinator on the compute nodes formed the group), a mix runs, and, with
 * {@code --kill-memory-node}, the primary's memory node stops under it (or, with {@code --kill-memory-node=backup}, a
 * backup's): the report gives the operations of every second through the view change and the time until the index
 * served again. Then a replacement memory node joins and is
 * copied while the mix goes on (its progress printed), and every key is verified: it holds its last acknowledged value,
 * or the value of a later put whose outcome the failover left unknown.
 */
final class ReplicaDemo {
    /** Seconds of the mix before the kill, and the longest the mix runs after it. */
    static final int SECONDS_BEFORE_KILL = 3;
    static final int MAX_SECONDS = 120;

    private final PrintWriter out;
    private final Config base;
    private final DexSettings settings;
    private final int replicas;
    private final int computeNodes;

    ReplicaDemo(PrintWriter out, Config base, DexSettings settings, int replicas, int computeNodes) {
        this.out = out;
        this.base = base;
        this.settings = settings;
        this.replicas = replicas;
        this.computeNodes = computeNodes;
    }

    /** @param kill whose memory node to stop under the mix: {@code "primary"}, {@code "backup"}, or null for none */
    int run(long n, int putPercent, String kill, List<ActorSystem<?>> systems) throws Exception {
        out.printf("DEX on Pekko demo: memory server 0 held by %d memory nodes (one primary, %d backup%s), %d compute node(s) and a"
                + " client, each its own actor system in this JVM; fabric %s%s%n", replicas, replicas - 1, replicas == 2 ? "" : "s",
                computeNodes, transport(), local() ? " (each compute node writes every replica itself, docs/replication.md)" : "");
        List<ActorSystem<?>> memoryNodes = new ArrayList<>();
        // A memory node's actor system that is terminated stops at once, as a process that is killed: it does not leave
        // the cluster first (the demo's own stop at the end still leaves gracefully).
        Config memoryBase = base.withValue("pekko.coordinated-shutdown.run-by-actor-system-terminate",
                com.typesafe.config.ConfigValueFactory.fromAnyRef("off"))
                .withValue("dex.management.enabled", com.typesafe.config.ConfigValueFactory.fromAnyRef("off"));
        ActorSystem<Void> first = DexNodes.memoryNode(DexNodes.nodeConfig(memoryBase, "memory", "127.0.0.1", 0, List.of()), settings);
        systems.add(first);
        memoryNodes.add(first);
        List<String> seed = List.of(DexNodes.hostPort(first));
        for (int r = 1; r < replicas; r++) {
            ActorSystem<Void> replica = DexNodes.memoryNode(DexNodes.nodeConfig(memoryBase, "memory", "127.0.0.1", 0, seed), settings);
            systems.add(replica);
            memoryNodes.add(replica);
        }
        for (int c = 0; c < computeNodes; c++) {
            systems.add(DexNodes.computeNode(DexNodes.nodeConfig(base, "compute", "127.0.0.1", 0, seed), settings));
        }
        ActorSystem<DexClient.Command> clientSystem = DexNodes.client(DexNodes.nodeConfig(base, "client", "127.0.0.1", 0, seed), settings);
        systems.add(clientSystem);
        DemoCluster.awaitUp(systems, Duration.ofSeconds(60));
        MemoryNode.Description primary = awaitGroup(clientSystem, replicas, Duration.ofSeconds(120));
        DemoCluster.awaitComputeNodes(clientSystem, computeNodes, Duration.ofSeconds(60));
        DexClientApi client = new DexClientApi(clientSystem, clientSystem, settings.requestTimeout());
        // Every compute node serves its share before the keys are written (the table server 0 formatted: equal widths).
        dev.dex.core.partition.PartitionTable table = settings.memory().partitions();
        DemoCluster.awaitRebalance(client, clientSystem, table, table.count(), n * DemoWorkload.KEY_SPACING, computeNodes,
                Duration.ofSeconds(90));

        long loadStart = System.nanoTime();
        load(client, n, settings.demoInFlight());
        out.printf("wrote %,d keys through the client in %.2f s: every change is on the backup%s before it is acknowledged%n", n,
                (System.nanoTime() - loadStart) / 1e9, replicas == 2 ? "" : "s");

        Map<Long, Long> written = new ConcurrentHashMap<>();
        Map<Long, Long> unknown = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLongArray perSecond = new AtomicLongArray(MAX_SECONDS + SECONDS_BEFORE_KILL + 10);
        AtomicLong failures = new AtomicLong();
        AtomicLong lastFailureNanos = new AtomicLong();
        long mixStart = System.nanoTime();
        Thread mixer = new Thread(() -> mix(client, n, putPercent, settings.demoInFlight(), written, unknown, stop, perSecond, failures,
                lastFailureNanos, mixStart), "demo-replica-mix");
        mixer.setDaemon(true);
        mixer.start();
        Thread.sleep(TimeUnit.SECONDS.toMillis(SECONDS_BEFORE_KILL));

        double servedAgain = Double.NaN;
        double killedAt = Double.NaN;
        boolean backup = "backup".equals(kill);
        if (kill != null) {
            MemoryNode.Description target = backup ? aBackup(clientSystem) : primary;
            ActorSystem<?> victim = memoryNodes.stream().filter(s -> s.address().equals(target.node().path().address())).findFirst()
                    .orElseThrow(() -> new IllegalStateException("the " + kill + " " + target.node().path() + " is not a node of this demo"));
            out.printf("killing the %s's memory node %s under the mix (its actor system stops without leaving the cluster,"
                    + " %s)...%n", kill, victim.address(), local() ? "its replica's verbs fail from then on" : "its region server with it");
            long killed = System.nanoTime();
            killedAt = (killed - mixStart) / 1e9;
            if (local()) {
                // Its replica dies with it at once, as with a host: the actor system alone takes a while to stop.
                ((dev.dex.rdma.local.LocalFabric) dev.dex.actors.node.Fabrics.open(settings.fabric())).killReplica(target.endpoint());
            }
            victim.terminate();
            DemoCluster.removeSame(systems, victim);
            DemoCluster.removeSame(memoryNodes, victim);
            servedAgain = awaitServing(client, n, killed, Duration.ofSeconds(60));
            if (backup) {
                out.printf(local() ? "the index served again %.2f s after the kill (the primary found its backup gone, the coordinator"
                        + " left it out of a new view, and the compute nodes moved to that view)%n"
                        : "the index served again %.2f s after the kill (the primary's link to its backup broke, the coordinator"
                        + " left it out of a new view)%n", servedAgain);
            } else {
                out.printf(local() ? "the index served again %.2f s after the kill (the backup found its primary gone, the coordinator"
                        + " made it primary of a new view, the compute nodes moved to it and reran the verbs in flight)%n"
                        : "the index served again %.2f s after the kill (the backup saw its stream close, the coordinator made it"
                        + " primary of a new view after the old primary's lease, the compute nodes moved to it and reran the reads and log writes in"
                        + " flight)%n", servedAgain);
            }

            out.println(backup ? "starting a replacement memory node; the primary copies its region to it while the mix goes on..."
                    : "starting a replacement memory node; the new primary copies its region to it while the mix goes on...");
            ActorSystem<Void> replacement = DexNodes.memoryNode(DexNodes.nodeConfig(memoryBase, "memory", "127.0.0.1", 0,
                    List.of(DexNodes.hostPort(clientSystem))), settings);
            systems.add(replacement);
            memoryNodes.add(replacement);
            awaitCopy(clientSystem, replacement, Duration.ofSeconds(120));
        }
        Thread.sleep(TimeUnit.SECONDS.toMillis(settings.demoSeconds())); // the mix after the copy: the service recovered
        stop.set(true);
        mixer.join(TimeUnit.SECONDS.toMillis(60));
        int seconds = (int) ((System.nanoTime() - mixStart) / 1_000_000_000L);
        out.print("operations per second of the mix:");
        for (int s = 0; s < Math.min(seconds, perSecond.length()); s++) {
            out.printf(" %,d", perSecond.get(s));
        }
        out.println();
        if (kill != null) {
            if (failures.get() == 0) {
                out.printf("the %s stopped at %.1f s; no operation failed (those in flight waited for the new view);"
                        + " served again after %.2f s%n", kill, killedAt, servedAgain);
            } else {
                out.printf("the %s stopped at %.1f s; %,d operations failed with a clear error meanwhile (their outcome"
                        + " unknown), the last %.2f s after it; served again after %.2f s%n", kill, killedAt, failures.get(),
                        lastFailureNanos.get() == 0 ? 0 : (lastFailureNanos.get() - mixStart) / 1e9 - killedAt, servedAgain);
            }
        }
        long mismatches = DemoWorkload.verify(client, n, settings.demoInFlight(), written, unknown);
        if (mismatches == 0) {
            out.printf("verified: all %,d keys hold their last acknowledged value (%,d puts of unknown outcome were either)%n", n,
                    unknown.size());
            return 0;
        }
        out.printf("FAILED: %,d keys do not hold their last acknowledged value%n", mismatches);
        return 1;
    }

    private String transport() {
        return settings.fabric().transport();
    }

    /** Over {@code local} the compute nodes write every replica; over {@code tcp} the primary streams to its backups. */
    private boolean local() {
        return transport().equals("local");
    }

    /** The group's primary, once it has its backups and each backup's copy is complete. */
    private MemoryNode.Description awaitGroup(ActorSystem<?> system, int members, Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        long reported = -1;
        while (System.nanoTime() < deadline) {
            List<MemoryNode.Description> memories = ClusterMember.memoryDescriptions(system);
            MemoryNode.Description primary = memories.stream().filter(d -> MemoryNode.Replica.PRIMARY_ROLE.equals(d.replica().role()))
                    .findFirst().orElse(null);
            long complete = memories.stream().filter(d -> MemoryNode.Replica.BACKUP_ROLE.equals(d.replica().role())
                    && d.replica().complete()).count();
            long left = memories.stream().mapToLong(d -> d.replica().copyLeft()).sum();
            if (primary != null && complete == members - 1) {
                out.printf("replica group formed: primary %s, %d complete backup(s)%n", primary.node().path().address(), complete);
                return primary;
            }
            if (left > 0 && left >> 20 != reported) {
                reported = left >> 20;
                out.printf("  copying the region to the backups: %,d MiB left%n", reported);
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("the replica group did not form within " + max.toSeconds() + " s");
    }

    /** A complete backup of the group, as the cluster describes it now. */
    private static MemoryNode.Description aBackup(ActorSystem<?> system) throws Exception {
        return ClusterMember.memoryDescriptions(system).stream()
                .filter(d -> MemoryNode.Replica.BACKUP_ROLE.equals(d.replica().role()) && d.replica().complete()).findFirst()
                .orElseThrow(() -> new IllegalStateException("the group has no complete backup to kill"));
    }

    /** Prints the replacement's copy progress until it is a complete backup. */
    private void awaitCopy(ActorSystem<?> system, ActorSystem<?> replacement, Duration max) throws Exception {
        long deadline = System.nanoTime() + max.toNanos();
        long started = System.nanoTime();
        while (System.nanoTime() < deadline) {
            for (MemoryNode.Description d : ClusterMember.memoryDescriptions(system)) {
                if (!d.node().path().address().equals(replacement.address())) {
                    continue;
                }
                MemoryNode.Replica replica = d.replica();
                if (MemoryNode.Replica.BACKUP_ROLE.equals(replica.role()) && replica.complete()) {
                    out.printf("the replacement is a complete backup %.2f s after it started%n", (System.nanoTime() - started) / 1e9);
                    return;
                }
                out.printf("  replacement: %s, view %d, %s%n", replica.role().toLowerCase(java.util.Locale.ROOT), replica.view(),
                        replica.copyLeft() > 0 ? String.format("%,d MiB left to copy", replica.copyLeft() >> 20) : "waiting for its copy");
            }
            Thread.sleep(500);
        }
        throw new IllegalStateException("the replacement was not copied within " + max.toSeconds() + " s");
    }

    /** Puts every key its loaded value ({@code key + 1}), {@code inFlight} at a time, retrying one that fails. */
    private static void load(DexClientApi client, long n, int inFlight) throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        AtomicLong failed = new AtomicLong();
        try (ProgressBar bar = DemoWorkload.bar("write", n)) {
            for (long i = 1; i <= n; i++) {
                long key = i * DemoWorkload.KEY_SPACING;
                slots.acquire();
                put(client, key, key + 1, slots, failed, 5);
                if ((i & 1023) == 0) {
                    bar.stepTo(i);
                }
            }
            slots.acquire(inFlight);
            bar.stepTo(n);
        }
        if (failed.get() > 0) {
            throw new IllegalStateException(failed.get() + " keys could not be written");
        }
    }

    private static void put(DexClientApi client, long key, long value, Semaphore slot, AtomicLong failed, int attempts) {
        client.put(key, value).whenComplete((replaced, failure) -> {
            if (failure == null) {
                slot.release();
            } else if (attempts > 1) {
                put(client, key, value, slot, failed, attempts - 1);
            } else {
                failed.incrementAndGet();
                slot.release();
            }
        });
    }

    /** The mix, tolerant of the failover: a failed put leaves its key's value unknown (old or new) until its next put. */
    private static void mix(DexClientApi client, long n, int putPercent, int inFlight, Map<Long, Long> written, Map<Long, Long> unknown,
                            AtomicBoolean stop, AtomicLongArray perSecond, AtomicLong failures, AtomicLong lastFailure, long start) {
        Semaphore slots = new Semaphore(inFlight);
        java.util.Set<Long> writing = ConcurrentHashMap.newKeySet();
        SplittableRandom random = new SplittableRandom(7);
        try {
            while (!stop.get() && System.nanoTime() - start < TimeUnit.SECONDS.toNanos(MAX_SECONDS)) {
                slots.acquire();
                long key = (1 + random.nextLong(n)) * DemoWorkload.KEY_SPACING;
                if (random.nextInt(100) < putPercent && writing.add(key)) {
                    long value = random.nextLong();
                    client.put(key, value).whenComplete((replaced, failure) -> {
                        if (failure == null) {
                            written.put(key, value);
                            unknown.remove(key);
                        } else {
                            unknown.put(key, value);
                            failures.incrementAndGet();
                            lastFailure.set(System.nanoTime());
                        }
                        writing.remove(key);
                        count(perSecond, start, failure == null);
                        slots.release();
                    });
                } else {
                    client.get(key).whenComplete((value, failure) -> {
                        if (failure != null) {
                            failures.incrementAndGet();
                            lastFailure.set(System.nanoTime());
                        }
                        count(perSecond, start, failure == null);
                        slots.release();
                    });
                }
            }
            slots.acquire(inFlight);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private static void count(AtomicLongArray perSecond, long start, boolean ok) {
        int second = (int) ((System.nanoTime() - start) / 1_000_000_000L);
        if (ok && second < perSecond.length()) {
            perSecond.incrementAndGet(second);
        }
    }

    /** Seconds from {@code since} until a put of a key in each partition's range succeeds again. */
    private static double awaitServing(DexClientApi client, long n, long since, Duration max) throws Exception {
        long key = DemoWorkload.KEY_SPACING * (n / 2) + 1; // between loaded keys: no mix key is touched
        DemoCluster.awaitAnswer(() -> client.put(key, key), System.nanoTime() + max.toNanos(),
                "the index did not serve again within " + max.toSeconds() + " s");
        return (System.nanoTime() - since) / 1e9;
    }
}
