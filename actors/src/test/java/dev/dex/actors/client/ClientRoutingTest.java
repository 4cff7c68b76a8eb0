package dev.dex.actors.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.TestCluster;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.partition.Ops;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.node.Keys;
import dev.dex.core.partition.PartitionTable;

/**
 * The client against a cluster of one memory node and two compute nodes: every operation reaches the
 * partition of its key wherever sharding put it, and a scan that spans partitions is the concatenation of
 * their parts, exactly the model's entries in key order. Wrong requests fail the call with
 * {@link DexException}.
 *
 * <p>The cluster and the model are shared by the tests of this class; every write goes into the model.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(LogCapturingExtension.class)
class ClientRoutingTest {
    private static final long WAIT_SECONDS = 60;
    private static final PartitionTable TABLE = PartitionTable.equalWidth(TestCluster.PARTITIONS, 0, TestCluster.KEY_RANGE);

    private TestCluster cluster;
    private ActorSystem<Void> memorySystem;
    private DexClientApi client;
    private final TreeMap<Long, Long> model = new TreeMap<>();

    @BeforeAll
    void startCluster() throws Exception {
        cluster = new TestCluster();
        memorySystem = cluster.memoryNode();
        cluster.computeNode(4L << 20);
        cluster.computeNode(4L << 20);
        client = cluster.client();
        cluster.awaitUp(Duration.ofSeconds(30));
    }

    @AfterAll
    void stopCluster() {
        cluster.close();
    }

    @Test
    void operationsReachEveryPartitionAndScansMergeTheirPartsInKeyOrder() throws Exception {
        SplittableRandom random = new SplittableRandom(11);
        TreeSet<Long> keys = new TreeSet<>(List.of(Long.MIN_VALUE + 1, -1L, Long.MAX_VALUE));
        for (int p = 0; p < TABLE.count(); p++) {
            long low = Math.max(TABLE.lowerExclusive(p), -1_000);
            long high = Math.min(TABLE.upperInclusive(p), TestCluster.KEY_RANGE + 1_000);
            keys.add(low + 1);
            keys.add(high);
            for (int i = 0; i < 20; i++) {
                keys.add(random.nextLong(low + 1, high + 1));
            }
        }
        Map<Long, CompletableFuture<Boolean>> puts = new TreeMap<>();
        for (long key : keys) {
            puts.put(key, client.put(key, ~key).toCompletableFuture());
        }
        for (Map.Entry<Long, CompletableFuture<Boolean>> put : puts.entrySet()) {
            assertEquals(model.containsKey(put.getKey()), put.getValue().get(WAIT_SECONDS, TimeUnit.SECONDS),
                    "a put says whether " + put.getKey() + " existed");
            model.put(put.getKey(), ~put.getKey());
        }
        long overwritten = keys.higher(TABLE.upperInclusive(6));
        assertTrue(await(client.put(overwritten, 77)), "a put of a present key says it existed");
        model.put(overwritten, 77L);
        awaitBothComputeNodesServe();
        TestCluster.verify(client, model);

        int p = 3;
        long inP = TABLE.lowerExclusive(p) + 1;
        int leftInP = model.subMap(inP, true, TABLE.upperInclusive(p), true).size();
        int inNext = model.subMap(TABLE.upperInclusive(p), false, TABLE.upperInclusive(p + 1), true).size();
        assertScan(inP, 5);
        assertScan(inP, leftInP);
        assertScan(inP, leftInP + 1);
        assertScan(inP + 1, leftInP + 3);
        assertScan(inP, leftInP + inNext + 2);
        assertScan(TABLE.upperInclusive(p), 3);
        assertScan(TABLE.upperInclusive(p) + 1, 3);
        assertScan(Long.MIN_VALUE, model.size() + 10);
        assertScan(Long.MIN_VALUE + 1, model.size());
        assertScan(-500_000, model.size() / 2);
        assertScan(TABLE.upperInclusive(TABLE.count() - 2) + 1, 1_000);
        assertScan(Long.MAX_VALUE, 5);

        int emptied = 9;
        List<Long> gone = new ArrayList<>(model.subMap(TABLE.lowerExclusive(emptied), false, TABLE.upperInclusive(emptied), true).keySet());
        gone.add(Long.MIN_VALUE + 1);
        gone.add(Long.MAX_VALUE);
        for (long key : gone) {
            assertTrue(await(client.delete(key)), "the first delete of " + key + " finds it");
            model.remove(key);
        }
        for (long key : gone) {
            assertFalse(await(client.delete(key)), "the second delete of " + key + " finds nothing");
            assertEquals(OptionalLong.empty(), await(client.get(key)), "a deleted key is gone: " + key);
        }
        assertScan(TABLE.lowerExclusive(emptied - 1) + 1, 60);
        assertScan(TABLE.lowerExclusive(emptied), 1);
        assertScan(TABLE.lowerExclusive(emptied) + 1, 5);
        assertScan(TABLE.lowerExclusive(emptied), model.size());
        assertScan(Long.MIN_VALUE, model.size() + 1);
        TestCluster.verify(client, model);
    }

    @Test
    void reservedKeysAndScanCountsOutOfRangeFailWithDexException() throws Exception {
        String reserved = "key Long.MIN_VALUE is reserved";
        assertFailsWith(client.get(Long.MIN_VALUE), reserved);
        assertFailsWith(client.put(Long.MIN_VALUE, 1), reserved);
        assertFailsWith(client.delete(Long.MIN_VALUE), reserved);
        assertFailsWith(client.scan(0, 0), "scan count 0 outside [1, " + Ops.MAX_SCAN * 16 + "]");
        assertFailsWith(client.scan(0, -3), "scan count -3 outside");
        assertFailsWith(client.scan(0, Ops.MAX_SCAN * 16 + 1), "scan count " + (Ops.MAX_SCAN * 16 + 1) + " outside");

        long key = TestCluster.KEY_RANGE / 2 + 1;
        assertEquals(model.containsKey(key), await(client.put(key, 5)), "the client serves after refusing");
        model.put(key, 5L);
        assertEquals(OptionalLong.of(5), await(client.get(key)));
        assertScan(Long.MIN_VALUE, 3);
        assertScan(key, 1);
    }

    @Test
    void byteStringKeysAreOrderedAsUnsignedBytesAndShareTheIndexWithLongKeys() throws Exception {
        DexClientApi.Blocking blocking = client.blocking();
        List<String> texts = List.of("user:5", "user:42", "user:420", "user:4", "\u00e9t\u00e9", "user:");
        for (int i = 0; i < texts.size(); i++) {
            assertFalse(blocking.put(texts.get(i), i), texts.get(i) + " was absent");
            model.put(Keys.engineKey(texts.get(i)), (long) i);
        }
        assertFalse(blocking.put(new byte[] {(byte) 0xff, 1}, 99), "0xff01 was absent");
        model.put(Keys.engineKey(new byte[] {(byte) 0xff, 1}), 99L);
        assertEquals(OptionalLong.of(1), blocking.get("user:42"));
        assertEquals(OptionalLong.of(1), blocking.get("user:42\0".getBytes(java.nio.charset.StandardCharsets.UTF_8)),
                "a trailing zero byte is padding");
        assertEquals(OptionalLong.of(99), blocking.get(new byte[] {(byte) 0xff, 1}));
        assertEquals(OptionalLong.empty(), blocking.get("user:6"));

        List<String> scanned = new ArrayList<>();
        for (DexClientApi.Entry entry : blocking.scan("user:", 5)) {
            scanned.add(entry.keyText() + "=" + entry.value());
        }
        assertEquals(List.of("user:=5", "user:4=3", "user:42=1", "user:420=2", "user:5=0"), scanned, "unsigned byte order");
        List<DexClientApi.Entry> fromLong = blocking.scan(Keys.engineKey("user:"), 5);
        assertEquals(blocking.scan("user:", 5), fromLong, "a long key and its bytes are one key");
        assertEquals("\u00e9t\u00e9", blocking.scan("\u00c0", 1).get(0).keyText(), "0xc3a9 sorts after every ASCII key");

        assertTrue(blocking.delete("user:4"));
        model.remove(Keys.engineKey("user:4"));
        assertFalse(blocking.delete("user:4"));
        DexException wide = assertThrows(DexException.class, () -> blocking.put("user:4200", 1));
        assertEquals("key user:4200 is 9 bytes; this index's keys are at most 8 bytes", wide.getMessage());
        assertThrows(DexException.class, () -> blocking.get(new byte[2]), "the empty key is reserved");
        assertEquals(blocking.scan(Long.MIN_VALUE, 3), blocking.scan("", 3), "the empty start is the first key");
        TestCluster.verify(client, model);
    }

    @Test
    void operationsOneThreadSendsWithoutWaitingAreAppliedInThatOrder() throws Exception {
        long key = TABLE.lowerExclusive(5) + 17;
        int n = 3_000;
        List<CompletableFuture<OptionalLong>> reads = new ArrayList<>();
        List<CompletableFuture<Boolean>> writes = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            writes.add(client.put(key, i).toCompletableFuture());
            reads.add(client.get(key).toCompletableFuture());
        }
        for (int i = 1; i <= n; i++) {
            assertEquals(OptionalLong.of(i), reads.get(i - 1).get(WAIT_SECONDS, TimeUnit.SECONDS),
                    "the get sent right after put " + i + " (several batches of the partition were in flight)");
        }
        for (int i = 2; i <= n; i++) {
            assertTrue(writes.get(i - 1).get(WAIT_SECONDS, TimeUnit.SECONDS), "put " + i + " found the key");
        }
        writes.get(0).get(WAIT_SECONDS, TimeUnit.SECONDS);
        model.put(key, (long) n);
    }

    /**
     * A new client knows no partition's epoch: its first batches of writes are refused ({@link Ops#STALE}) and go
     * again under the epoch the refusal named, ahead of what was queued meanwhile, so the order still holds.
     */
    @Test
    void aNewClientsFirstWritesGoAgainUnderTheEpochAndKeepTheirOrder() throws Exception {
        DexClientApi fresh = cluster.client();
        cluster.awaitUp(Duration.ofSeconds(30));
        long key = TABLE.lowerExclusive(6) + 29;
        int n = 1_000;
        List<CompletableFuture<OptionalLong>> reads = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            fresh.put(key, i);
            reads.add(fresh.get(key).toCompletableFuture());
        }
        for (int i = 1; i <= n; i++) {
            assertEquals(OptionalLong.of(i), reads.get(i - 1).get(WAIT_SECONDS, TimeUnit.SECONDS), "the get sent right after put " + i);
        }
        model.put(key, (long) n);
    }

    @Test
    void batchCallsAndBlockingCallsAnswerLikeSingleOnes() throws Exception {
        Map<Long, Long> entries = new TreeMap<>();
        for (int p = 0; p < TABLE.count(); p++) {
            for (int i = 0; i < 12; i++) {
                long key = Math.max(TABLE.lowerExclusive(p), -1) + 101 + 7L * i;
                entries.put(key, key * 3 + p);
            }
        }
        await(client.putAll(entries));
        model.putAll(entries);
        List<Long> asked = new ArrayList<>(entries.keySet());
        long absent = TestCluster.KEY_RANGE / 2 + 3;
        model.remove(absent);
        await(client.delete(absent));
        asked.add(absent);
        assertEquals(entries, await(client.getAll(asked)), "every present key with its value; the absent one left out");

        DexClientApi.Blocking blocking = client.blocking();
        long key = asked.get(5);
        assertEquals(OptionalLong.of(entries.get(key)), blocking.get(key));
        assertTrue(blocking.put(key, -8), "the key existed");
        assertEquals(OptionalLong.of(-8), blocking.get(key));
        assertTrue(blocking.delete(key));
        assertFalse(blocking.delete(key));
        model.remove(key);
        assertEquals(await(client.scan(key - 50, 4)), blocking.scan(key - 50, 4));
        DexException refused = assertThrows(DexException.class, () -> blocking.get(Long.MIN_VALUE));
        assertTrue(refused.getMessage().contains("key Long.MIN_VALUE is reserved"), refused.getMessage());
        blocking.putAll(Map.of(key, 12L));
        model.put(key, 12L);
        assertEquals(Map.of(key, 12L), blocking.getAll(List.of(key, absent)));
    }

    @Test
    void futuresCompleteOnTheExecutorTheApiWasGiven() throws Exception {
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newSingleThreadExecutor(
                task -> new Thread(task, "test-api-executor"));
        java.util.concurrent.atomic.AtomicInteger tasks = new java.util.concurrent.atomic.AtomicInteger();
        try {
            DexClientApi api = new DexClientApi(cluster.clientSystem, Duration.ofSeconds(30), task -> {
                tasks.incrementAndGet();
                pool.execute(task);
            }, KeyFormat.EIGHT.bytes());
            long key = TABLE.lowerExclusive(2) + 5;
            List<CompletableFuture<String>> threads = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                CompletableFuture<Boolean> put = api.put(key, i).toCompletableFuture();
                threads.add(put.thenApply(existed -> Thread.currentThread().getName()));
            }
            for (CompletableFuture<String> thread : threads) {
                String name = thread.get(WAIT_SECONDS, TimeUnit.SECONDS);
                assertTrue(name.equals("test-api-executor") || name.equals(Thread.currentThread().getName()),
                        "completed on the given executor (or already done when the callback was added): " + name);
            }
            model.put(key, 49L);
            assertTrue(tasks.get() > 0 && tasks.get() <= 50, "one executor task per answered batch: " + tasks.get());
            assertEquals(OptionalLong.of(49), await(api.get(key)));
        } finally {
            pool.shutdown();
        }
    }

    /** A scan's answer is exactly the first {@code count} entries of the model from {@code start}. */
    private void assertScan(long start, int count) throws Exception {
        List<DexClientApi.Entry> expected = new ArrayList<>();
        for (Map.Entry<Long, Long> e : model.tailMap(start, true).entrySet()) {
            if (expected.size() == count) {
                break;
            }
            expected.add(new DexClientApi.Entry(e.getKey(), e.getValue()));
        }
        assertEquals(expected, await(client.scan(start, count)), "scan of " + count + " from " + start);
    }

    /** Polls, with traffic to every partition (sharding starts a moved entity on its next message). */
    private void awaitBothComputeNodesServe() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        List<ComputeNode.Status> statuses = List.of();
        while (System.nanoTime() < deadline) {
            for (int p = 0; p < TABLE.count(); p++) {
                await(client.get(TABLE.upperInclusive(p)));
            }
            statuses = computeStatuses();
            if (statuses.size() == 2 && statuses.stream().allMatch(s -> !s.partitionsHeld().isEmpty())) {
                break;
            }
            Thread.sleep(200);
        }
        assertEquals(2, statuses.size(), "two compute nodes: " + statuses);
        Set<Integer> held = new HashSet<>();
        for (ComputeNode.Status status : statuses) {
            assertFalse(status.partitionsHeld().isEmpty(), status.address() + " serves partitions: " + statuses);
            for (int partition : status.partitionsHeld()) {
                assertTrue(held.add(partition), "partition " + partition + " is held by one compute node only: " + statuses);
            }
        }
    }

    private List<ComputeNode.Status> computeStatuses() throws Exception {
        Receptionist.Listing listing = AskPattern.<Receptionist.Command, Receptionist.Listing>ask(memorySystem.receptionist(),
                replyTo -> Receptionist.find(ComputeNode.KEY, replyTo), Duration.ofSeconds(5), memorySystem.scheduler())
                .toCompletableFuture().get(10, TimeUnit.SECONDS);
        List<ComputeNode.Status> statuses = new ArrayList<>();
        for (ActorRef<ComputeNode.Command> node : listing.getServiceInstances(ComputeNode.KEY)) {
            statuses.add(AskPattern.<ComputeNode.Command, ComputeNode.Status>ask(node, ComputeNode.GetStatus::new,
                    Duration.ofSeconds(5), memorySystem.scheduler()).toCompletableFuture().get(10, TimeUnit.SECONDS));
        }
        return statuses;
    }

    private static <T> T await(CompletionStage<T> stage) throws Exception {
        return stage.toCompletableFuture().get(WAIT_SECONDS, TimeUnit.SECONDS);
    }

    private static void assertFailsWith(CompletionStage<?> stage, String says) {
        ExecutionException failed = assertThrows(ExecutionException.class, () -> await(stage));
        DexException error = assertInstanceOf(DexException.class, failed.getCause());
        assertTrue(error.getMessage().contains(says), "'" + error.getMessage() + "' says " + says);
    }
}
