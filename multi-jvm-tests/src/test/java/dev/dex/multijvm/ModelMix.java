package dev.dex.multijvm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.dex.actors.client.DexClientApi;

/**
 * Mixed operations checked exactly against a model: gets, puts (replacing loaded keys and inserting new
 * ones between them), deletes, and scans, from the calling thread with {@code inFlight} operations
 * outstanding. A key has at most one operation in flight, so the model, updated when an operation is
 * sent, says exactly what each reply must be, found flags included. Scans run in bursts while nothing
 * else is in flight, so they too have one right answer.
 *
 * <p>Retries: the client re-sends operations whose partition answered {@code NOT_HELD} (not applied, so
 * harmless) and batches unanswered within {@code dex.client.batch-timeout} (5 s). The latter may apply a
 * write twice, which would turn an insert's "not found" into "replaced" and show here as a mismatch.
 */
final class ModelMix {
    private static final int EXAMPLES = 10;

    /** What ran and how many replies disagreed with the model. */
    record Result(long gets, long puts, long deletes, long scans, long scannedEntries, long mismatches, List<String> examples) {
    }

    private final DexClientApi client;
    private final long keyLimit;
    private final TreeMap<Long, Long> model = new TreeMap<>();
    private final AtomicLong mismatches = new AtomicLong();
    private final List<String> examples = Collections.synchronizedList(new ArrayList<>());

    /** A mix over keys in [1, (loaded + 1) * KEY_SPACING], starting from the bulk-loaded keys. */
    ModelMix(DexClientApi client, long loaded) {
        this.client = client;
        this.keyLimit = ClusterHarness.key(loaded + 1);
        for (long i = 1; i <= loaded; i++) {
            model.put(ClusterHarness.key(i), ClusterHarness.loadedValue(ClusterHarness.key(i)));
        }
    }

    /** The entries the cluster must hold once every operation sent so far has completed. */
    TreeMap<Long, Long> model() {
        return model;
    }

    /** Runs {@code operations} operations, with a burst of scans every {@code scanEvery}, then waits for all. */
    Result run(int operations, int inFlight, int scanEvery, long seed) throws Exception {
        SplittableRandom random = new SplittableRandom(seed);
        Semaphore slots = new Semaphore(inFlight);
        Set<Long> busy = ConcurrentHashMap.newKeySet();
        AtomicLong gets = new AtomicLong();
        AtomicLong puts = new AtomicLong();
        AtomicLong deletes = new AtomicLong();
        long scans = 0;
        long scanned = 0;
        for (int op = 0; op < operations; op++) {
            if (op > 0 && op % scanEvery == 0) {
                slots.acquire(inFlight);
                scanned += scanBurst(random);
                scans += 4;
                slots.release(inFlight);
            }
            // Half the keys on the loaded grid (replace, delete, find), half anywhere (mostly inserts and misses).
            long key;
            do {
                key = random.nextBoolean() ? ClusterHarness.key(1 + random.nextLong(keyLimit / ClusterHarness.KEY_SPACING))
                        : 1 + random.nextLong(keyLimit);
            } while (!busy.add(key));
            slots.acquire();
            long k = key;
            int choice = random.nextInt(100);
            Long before = model.get(key);
            CompletableFuture<?> reply;
            if (choice < 50) {
                reply = client.get(key).toCompletableFuture().whenComplete((value, failure) -> {
                    check(failure == null && value.equals(before == null ? OptionalLong.empty() : OptionalLong.of(before)),
                            "get " + k + ": expected " + before + ", got " + (failure != null ? failure : value));
                    gets.incrementAndGet();
                });
            } else if (choice < 85) {
                long value = random.nextLong();
                model.put(key, value);
                reply = client.put(key, value).toCompletableFuture().whenComplete((replaced, failure) -> {
                    check(failure == null && replaced == (before != null),
                            "put " + k + ": expected replaced=" + (before != null) + ", got " + (failure != null ? failure : replaced));
                    puts.incrementAndGet();
                });
            } else {
                model.remove(key);
                reply = client.delete(key).toCompletableFuture().whenComplete((found, failure) -> {
                    check(failure == null && found == (before != null),
                            "delete " + k + ": expected found=" + (before != null) + ", got " + (failure != null ? failure : found));
                    deletes.incrementAndGet();
                });
            }
            reply.whenComplete((ignored, failure) -> {
                busy.remove(k);
                slots.release();
            });
        }
        if (!slots.tryAcquire(inFlight, 120, TimeUnit.SECONDS)) {
            throw new AssertionError("operations still in flight 120 s after the last was sent");
        }
        slots.release(inFlight);
        return new Result(gets.get(), puts.get(), deletes.get(), scans, scanned, mismatches.get(), List.copyOf(examples));
    }

    /** Four scans at once, nothing else in flight: three short ones and one across several partitions. */
    private long scanBurst(SplittableRandom random) throws Exception {
        List<CompletableFuture<Integer>> scans = new ArrayList<>();
        for (int s = 0; s < 4; s++) {
            long start = random.nextLong(keyLimit);
            int count = s < 3 ? 1 + random.nextInt(500) : 2_000 + random.nextInt(8_000);
            scans.add(scan(start, count));
        }
        long entries = 0;
        for (CompletableFuture<Integer> scan : scans) {
            entries += scan.get(120, TimeUnit.SECONDS);
        }
        return entries;
    }

    /** Scans from {@code start} and compares with the model; completes with the entries returned. */
    CompletableFuture<Integer> scan(long start, int count) {
        List<DexClientApi.Entry> expected = new ArrayList<>(Math.min(count, model.size()));
        Iterator<Map.Entry<Long, Long>> entries = model.tailMap(start, true).entrySet().iterator();
        while (expected.size() < count && entries.hasNext()) {
            Map.Entry<Long, Long> entry = entries.next();
            expected.add(new DexClientApi.Entry(entry.getKey(), entry.getValue()));
        }
        return client.scan(start, count).toCompletableFuture().handle((found, failure) -> {
            if (failure != null) {
                check(false, "scan " + start + " x " + count + " failed: " + failure);
                return 0;
            }
            check(Objects.equals(expected, found), "scan " + start + " x " + count + ": expected " + expected.size()
                    + " entries, got " + found.size() + firstDifference(expected, found));
            return found.size();
        });
    }

    private static String firstDifference(List<DexClientApi.Entry> expected, List<DexClientApi.Entry> found) {
        for (int i = 0; i < Math.min(expected.size(), found.size()); i++) {
            if (!expected.get(i).equals(found.get(i))) {
                return "; first difference at " + i + ": expected " + expected.get(i) + ", got " + found.get(i);
            }
        }
        return "";
    }

    private void check(boolean ok, String what) {
        if (!ok && mismatches.incrementAndGet() <= EXAMPLES) {
            examples.add(what);
        }
    }

    long mismatches() {
        return mismatches.get();
    }

    List<String> examples() {
        return List.copyOf(examples);
    }
}
