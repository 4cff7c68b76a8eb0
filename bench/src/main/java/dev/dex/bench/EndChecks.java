package dev.dex.bench;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import dev.dex.core.cache.DexEngine;
import dev.dex.core.engine.IndexEngine;
import dev.dex.core.engine.IndexSession;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.RemoteMemory;

/**
 * The checks after a run with injected faults, with the faults switched off, each printed as one {@code check} line:
 * <ol>
 *   <li>{@code frames locked N}: frame locks still held once every worker ended (DEX modes; n/a elsewhere);</li>
 *   <li>{@code wrong answers N}: acknowledged writes whose answer the {@link KeyModel} rules out;</li>
 *   <li>then every partition that a failure left unusable is taken up again, and the engines are closed, which
 *       writes every dirty page back;</li>
 *   <li>{@code remote locks held N}: tree nodes whose lock word is still set ({@link TreeValidator#lockedNodes});</li>
 *   <li>{@code validator ok} or {@code validator failed}: {@link TreeValidator};</li>
 *   <li>{@code lost N}: a reader that took no part in the run ({@link EngineFactory#openReader}) scans the whole
 *       tree; a key is lost when it is missing though the model says it must be there, holds a value the model does
 *       not allow, or is there though the model says it cannot be.</li>
 * </ol>
 * A check that fails adds a one-line reason to {@link #failures()}. The checks run on a thread of their own, for at
 * most {@link #LIMIT_NANOS}: a failure may have left an engine that never finishes closing. When they do not finish,
 * that is a failure too, and the engines are left open.
 */
final class EndChecks implements Runnable {
    static final long LIMIT_NANOS = TimeUnit.SECONDS.toNanos(120);
    /** Entries per scan call of the read-back. */
    private static final int SCAN_BATCH = 1024;
    /** Lost keys shown on stderr. */
    private static final int SHOWN = 10;

    private final BenchSettings config;
    private final KeySpace keySpace;
    private final EngineCluster engines;
    private final KeyModel model;
    private final long cacheBytes;
    private final PrintWriter out;
    private final PrintWriter err;
    private final List<String> failures = new ArrayList<>();
    /** What the checks are doing, for the message when they do not finish. */
    private volatile String step = "starting";

    EndChecks(BenchSettings config, KeySpace keySpace, EngineCluster engines, KeyModel model, long cacheBytes,
              PrintWriter out, PrintWriter err) {
        this.config = config;
        this.keySpace = keySpace;
        this.engines = engines;
        this.model = model;
        this.cacheBytes = cacheBytes;
        this.out = out;
        this.err = err;
    }

    /**
     * Runs the checks, waiting at most {@link #LIMIT_NANOS}; returns the reasons of those that failed (empty: all
     * passed).
     */
    List<String> runBounded() {
        Thread thread = new Thread(this, "bench-checks");
        thread.setDaemon(true);
        thread.start();
        boolean interrupted = false;
        long deadline = System.nanoTime() + LIMIT_NANOS;
        while (thread.isAlive() && System.nanoTime() - deadline < 0) {
            try {
                thread.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            } catch (InterruptedException e) {
                interrupted = true;
                break;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        synchronized (failures) {
            if (thread.isAlive()) {
                engines.leaveOpen();
                failures.add("the checks did not finish within " + TimeUnit.NANOSECONDS.toSeconds(LIMIT_NANOS) + " s (stuck "
                        + step + ")");
            }
            return List.copyOf(failures);
        }
    }

    @Override
    public void run() {
        try {
            engines.injectFaults(false);
            step = "counting locked frames";
            checkFrames();
            checkAnswers();
            step = "taking up the partitions that failures left unusable";
            settlePartitions();
            step = "closing the engines (writing dirty pages back)";
            engines.closeEngines();
            step = "counting remote locks and validating the tree";
            checkTree();
            step = "reading every key back";
            checkKeys();
            step = "done";
        } catch (RuntimeException | Error e) {
            fail("the checks failed while " + step + ": " + e);
            e.printStackTrace(err);
            err.flush();
        }
    }

    /** Frame locks held in the run's DEX engines, or -1 when none of its engines has frames. */
    static int lockedFrames(EngineCluster engines) {
        int locked = 0;
        boolean cached = false;
        for (IndexEngine engine : engines.engines()) {
            if (engine instanceof DexEngine dex) {
                cached = true;
                locked += dex.lockedFrames();
            }
        }
        return cached ? locked : -1;
    }

    private void checkFrames() {
        int locked = lockedFrames(engines);
        if (locked < 0) {
            line("frames locked n/a (mode %s has no frames)", config.mode().cliName());
            return;
        }
        line("frames locked %d", locked);
        if (locked > 0) {
            fail(locked + " frames locked after the run");
        }
    }

    private void checkAnswers() {
        long wrong = model.wrongAnswers();
        line("wrong answers %d", wrong);
        if (wrong > 0) {
            fail(wrong + " acknowledged writes answered what the model rules out");
        }
    }

    private void settlePartitions() {
        PartitionRecovery recovery = engines.recovery();
        if (recovery == null) {
            return;
        }
        for (int p = 0; p < recovery.partitions(); p++) {
            if (!recovery.recoverIfNeeded(p)) {
                fail("partition " + p + " could not be acquired again after the run: " + recovery.lastFailure());
            }
        }
    }

    private void checkTree() {
        try (RemoteMemory memory = engines.connect()) {
            long locked = TreeValidator.lockedNodes(memory);
            line("remote locks held %d", locked);
            if (locked > 0) {
                fail(locked + " tree nodes left locked by nobody");
            }
            try {
                TreeValidator.Report report = TreeValidator.validateWords(memory, (key, value) -> { });
                line("validator ok: height %d, %,d entries, %,d leaves", report.height(), report.entries(),
                        report.nodesPerLevel()[0]);
            } catch (IllegalStateException e) {
                String first = e.getMessage().lines().skip(1).findFirst().orElse(e.getMessage()).strip();
                line("validator failed: %s", first);
                err.println(e.getMessage());
                err.flush();
                fail("the tree validator failed: " + first);
            }
        }
    }

    private void checkKeys() {
        long[] found;
        long[] values;
        try (RemoteMemory memory = engines.connect();
             IndexEngine reader = EngineFactory.openReader(config, memory, cacheBytes);
             IndexSession session = reader.newSession()) {
            long[][] entries = scanAll(session);
            found = entries[0];
            values = entries[1];
        }
        long missing = 0;
        long wrongValue = 0;
        long unexpected = 0;
        List<String> shown = new ArrayList<>();
        for (int i = 0; i < found.length; i++) {
            KeyModel.Allowed allowed = model.allowed(found[i]);
            if (!allowed.allows(values[i])) {
                if (allowed.values().length == 0) {
                    unexpected++;
                } else {
                    wrongValue++;
                }
                show(shown, found[i], "holds " + values[i] + ", expected " + allowed);
            }
        }
        for (long index = 0; index < keySpace.keys(); index++) {
            long key = keySpace.loadedKey(index);
            if (Arrays.binarySearch(found, key) < 0 && !model.allowed(key).absent()) {
                missing++;
                show(shown, key, "missing, expected " + model.allowed(key));
            }
        }
        for (long key : model.writtenKeys()) {
            if (!keySpace.isLoaded(key) && Arrays.binarySearch(found, key) < 0 && !model.allowed(key).absent()) {
                missing++;
                show(shown, key, "missing, expected " + model.allowed(key));
            }
        }
        long lost = missing + wrongValue + unexpected;
        line("lost %d of %,d entries read back (%d missing, %d with a value never written, %d there that cannot be)",
                lost, found.length, missing, wrongValue, unexpected);
        if (lost > 0) {
            for (String s : shown) {
                err.println("lost: " + s);
            }
            err.flush();
            fail(lost + " keys lost");
        }
    }

    /** Every entry of the tree through {@code session}, ascending: {keys (first words), values}. */
    private long[][] scanAll(IndexSession session) {
        BenchKeys keys = new BenchKeys(config.keyBytes());
        int words = keys.words();
        long[] start = keys.of(keySpace.minKey()).clone();
        long[] batchKeys = new long[SCAN_BATCH * words];
        long[] batchValues = new long[SCAN_BATCH];
        long[] found = new long[(int) Math.min(Integer.MAX_VALUE - 8, keySpace.keys() + 1024)];
        long[] values = new long[found.length];
        int n = 0;
        while (true) {
            int got = words == 1 ? session.scan(start[0], SCAN_BATCH, batchKeys, batchValues)
                    : session.scan(start, SCAN_BATCH, batchKeys, batchValues);
            if (n + got > found.length) {
                int grown = (int) Math.min(Integer.MAX_VALUE - 8, Math.max(n + (long) got, 2L * found.length));
                found = Arrays.copyOf(found, grown);
                values = Arrays.copyOf(values, grown);
            }
            for (int i = 0; i < got; i++) {
                found[n] = batchKeys[i * words];
                values[n] = batchValues[i];
                if (n > 0 && found[n] <= found[n - 1]) {
                    throw new IllegalStateException("the scan went from key " + found[n - 1] + " to " + found[n]);
                }
                n++;
            }
            if (got < SCAN_BATCH) {
                break;
            }
            System.arraycopy(batchKeys, (got - 1) * words, start, 0, words);
            IndexSession.successor(start, words);
        }
        return new long[][] {Arrays.copyOf(found, n), Arrays.copyOf(values, n)};
    }

    private static void show(List<String> shown, long key, String what) {
        if (shown.size() < SHOWN) {
            shown.add("key " + key + " " + what);
        }
    }

    private void line(String format, Object... args) {
        out.printf(Locale.ROOT, "%-12s %s%n", "check", String.format(Locale.ROOT, format, args));
        out.flush();
    }

    private void fail(String reason) {
        synchronized (failures) {
            failures.add(reason);
        }
    }

    /** Why the checks that failed did; read after {@link #runBounded}. */
    List<String> failures() {
        synchronized (failures) {
            return List.copyOf(failures);
        }
    }
}
