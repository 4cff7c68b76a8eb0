package dev.dex.bench;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicReference;

import org.HdrHistogram.Histogram;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.local.LocalFabric;
import dev.dex.rdma.tcp.TcpFabric;
import dev.dex.rdma.tcp.TcpSettings;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code dex bench --verbs}: the fabric alone. A memory node's region is exported in this JVM (over tcp: served
 * on loopback by event loops of its own, reached by a compute side with others, as on two hosts), and for each
 * verb (a read and a write of {@code --bytes}, a compare-and-swap) it measures the round trip of one thread
 * issuing one verb at a time, then the verbs per second of {@code --threads} threads issuing them at once
 * (pipelined on the connections), with their latency under that load. A last row issues reads in batches of
 * {@code --batch} ({@link dev.dex.rdma.VerbBatch}): each thread keeps that many reads in flight together and waits once
 * for all of them; its latencies are a whole batch's.
 */
@Command(name = "dex bench --verbs", mixinStandardHelpOptions = true, usageHelpAutoWidth = true,
        description = "Measures the fabric's verbs: single-thread round trip (p50/p99) and pipelined verbs per second.")
public final class VerbBenchCommand implements Callable<Integer> {
    private static final int REGION_CHUNK = 1 << 20;
    private static final int LATENCY_SAMPLES = 20_000;

    @Spec
    CommandSpec spec;

    @Option(names = "--fabric", paramLabel = "TRANSPORT", defaultValue = "tcp",
            description = "local or tcp (default: ${DEFAULT-VALUE}).")
    String fabric;

    @Option(names = "--threads", paramLabel = "N", defaultValue = "16",
            description = "Threads issuing verbs at once in the throughput phase (default: ${DEFAULT-VALUE}).")
    int threads;

    @Option(names = "--seconds", paramLabel = "S", defaultValue = "3",
            description = "Seconds of the throughput phase of each verb (default: ${DEFAULT-VALUE}).")
    int seconds;

    @Option(names = "--bytes", paramLabel = "B", defaultValue = "1024",
            description = "Bytes per read and write (default: ${DEFAULT-VALUE}, one tree node).")
    int bytes;

    @Option(names = "--connections", paramLabel = "C", defaultValue = "1",
            description = "tcp: connections to the memory node (default: ${DEFAULT-VALUE}).")
    int connections;

    @Option(names = "--spin-ns", paramLabel = "NS", defaultValue = "50000",
            description = "tcp: how long a waiting thread spins before it parks (default: ${DEFAULT-VALUE}).")
    long spinNanos;

    @Option(names = "--io-threads", paramLabel = "N", defaultValue = "1",
            description = "tcp: event-loop threads on each side (default: ${DEFAULT-VALUE}).")
    int ioThreads;

    @Option(names = "--batch", paramLabel = "N", defaultValue = "16",
            description = "Reads per batch in the batched row, 0 for no such row (default: ${DEFAULT-VALUE}).")
    int batch;

    private final List<Row> rows = new ArrayList<>();

    /** One verb's figures. */
    record Row(String verb, long p50Nanos, long p99Nanos, double verbsPerSecond, long loadedP50Nanos, long loadedP99Nanos) {
    }

    /** A command line for this command, with bad input reported as {@link BenchCommand} does (exit code 2). */
    public static CommandLine commandLine() {
        return new CommandLine(new VerbBenchCommand());
    }

    @Override
    public Integer call() throws Exception {
        check(fabric.equals("local") || fabric.equals("tcp"), "--fabric must be local or tcp: " + fabric);
        check(threads >= 1 && threads <= 256, "--threads must be in [1, 256]: " + threads);
        check(seconds >= 1 && seconds <= 600, "--seconds must be in [1, 600]: " + seconds);
        check(bytes >= 8 && bytes <= 1 << 20 && bytes % 8 == 0, "--bytes must be a multiple of 8 in [8, 1048576]: " + bytes);
        check(connections >= 1 && connections <= 64, "--connections must be in [1, 64]: " + connections);
        check(spinNanos >= 0, "--spin-ns must be >= 0: " + spinNanos);
        check(ioThreads >= 1 && ioThreads <= 256, "--io-threads must be in [1, 256]: " + ioThreads);
        check(batch >= 0 && batch <= 1024, "--batch must be in [0, 1024]: " + batch);
        PrintWriter out = spec.commandLine().getOut();
        TcpSettings tcp = new TcpSettings("127.0.0.1", 0, connections, TcpSettings.DEFAULTS.window(),
                TcpSettings.DEFAULTS.verbTimeout(), TcpSettings.DEFAULTS.connectTimeout(), ioThreads, spinNanos,
                TcpSettings.DEFAULTS.maxTransfer());
        boolean overTcp = fabric.equals("tcp");
        long regionLength = (long) REGION_CHUNK
                * (2 + (long) Math.ceil((double) (threads + 1) * bytes * Math.max(1, batch) / REGION_CHUNK));
        try (Fabric memorySide = overTcp ? new TcpFabric(tcp, 0) : new LocalFabric();
             Fabric computeSide = overTcp ? new TcpFabric(tcp, 0) : null) {
            ExportedRegion region = memorySide.export(0, regionLength, REGION_CHUNK);
            Fabric client = computeSide != null ? computeSide : memorySide;
            try (RemoteMemory memory = client.connect(Map.of(0, region.endpoint()))) {
                out.printf(Locale.ROOT, "fabric %s%s: %d-byte reads and writes; 1 thread, then %d threads for %d s each%n", fabric,
                        overTcp ? " (" + ((TcpFabric) client).ioTransport() + ", loopback, connections per server: " + connections + ")" : "",
                        bytes, threads, seconds);
                for (String verb : List.of("read", "write", "cas")) {
                    rows.add(measure(memory, verb));
                }
                if (batch > 0) {
                    rows.add(measure(memory, "read*" + batch));
                }
            }
        }
        out.printf(Locale.ROOT, "%-9s %12s %12s | %14s %12s %12s%n", "verb", "1 thr p50 us", "1 thr p99 us",
                threads + " thr verbs/s", "p50 us", "p99 us");
        for (Row row : rows) {
            out.printf(Locale.ROOT, "%-9s %12.1f %12.1f | %,14.0f %12.1f %12.1f%n", row.verb(), row.p50Nanos() / 1e3,
                    row.p99Nanos() / 1e3, row.verbsPerSecond(), row.loadedP50Nanos() / 1e3, row.loadedP99Nanos() / 1e3);
        }
        if (batch > 0) {
            out.printf(Locale.ROOT, "read*%d: reads in batches of %d; its latencies are a whole batch's, its rate counts reads%n",
                    batch, batch);
        }
        out.flush();
        return 0;
    }

    /** The figures of the last run, for tests. */
    List<Row> rows() {
        return rows;
    }

    private Row measure(RemoteMemory memory, String verb) throws Exception {
        Histogram single = new Histogram(3);
        VerbLoop one = new VerbLoop(memory, verb, 0, bytes, batch);
        for (int i = 0; i < LATENCY_SAMPLES / 4; i++) {
            one.issue();
        }
        for (int i = 0; i < LATENCY_SAMPLES; i++) {
            long start = System.nanoTime();
            one.issue();
            single.recordValue(System.nanoTime() - start);
        }
        Histogram loaded = new Histogram(3);
        long[] counts = new long[threads];
        CyclicBarrier barrier = new CyclicBarrier(threads);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread[] workers = new Thread[threads];
        long runNanos = seconds * 1_000_000_000L;
        long[] elapsed = new long[threads];
        for (int t = 0; t < threads; t++) {
            int thread = t;
            workers[t] = new Thread(() -> {
                Histogram mine = new Histogram(3);
                try {
                    VerbLoop loop = new VerbLoop(memory, verb, thread + 1, bytes, batch);
                    barrier.await();
                    long start = System.nanoTime();
                    long end = start + runNanos;
                    long now = start;
                    long n = 0;
                    while (now < end) {
                        n += loop.issue();
                        long after = System.nanoTime();
                        mine.recordValue(after - now);
                        now = after;
                    }
                    counts[thread] = n;
                    elapsed[thread] = now - start;
                    synchronized (loaded) {
                        loaded.add(mine);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "verb-bench-" + t);
            workers[t].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        if (failure.get() != null) {
            throw new IllegalStateException(verb + " failed during the run", failure.get());
        }
        double perSecond = 0;
        for (int t = 0; t < threads; t++) {
            perSecond += counts[t] * 1e9 / Math.max(1, elapsed[t]);
        }
        return new Row(verb, single.getValueAtPercentile(50), single.getValueAtPercentile(99), perSecond,
                loaded.getValueAtPercentile(50), loaded.getValueAtPercentile(99));
    }

    private void check(boolean ok, String message) {
        if (!ok) {
            throw new ParameterException(spec.commandLine(), message);
        }
    }

    /** One thread's verbs on a slot of its own (a range of node-sized ranges, or one word for CAS). */
    private static final class VerbLoop {
        private final RemoteMemory memory;
        private final String verb;
        private final long address;
        private final int bytes;
        private final UnsafeBuffer buffer;
        private final VerbBatch reads;
        private final int span;
        private long expected;

        VerbLoop(RemoteMemory memory, String verb, int slot, int bytes, int batch) {
            this.memory = memory;
            this.verb = verb;
            this.bytes = bytes;
            this.span = Math.max(1, batch);
            this.address = GlobalAddress.of(0, REGION_CHUNK + (long) slot * bytes * span);
            this.buffer = new UnsafeBuffer(BufferUtil.allocateDirectAligned(Math.max(bytes * span, 64), 64));
            this.reads = new VerbBatch(span);
        }

        /** Issues one verb, or one batch of reads; returns the verbs done. */
        int issue() {
            if (verb.startsWith("read*")) {
                reads.clear();
                for (int i = 0; i < span; i++) {
                    reads.read(address + (long) i * bytes, buffer, i * bytes, bytes);
                }
                memory.submit(reads);
                reads.throwIfFailed();
                return reads.size();
            }
            switch (verb) {
                case "read" -> memory.read(address, buffer, 0, bytes);
                case "write" -> memory.write(address, buffer, 0, bytes);
                default -> {
                    long found = memory.compareAndSwap(address, expected, expected + 1);
                    if (found != expected) {
                        throw new IllegalStateException("CAS on a private word found " + found + ", expected " + expected);
                    }
                    expected++;
                }
            }
            return 1;
        }
    }
}
