package dev.dex.bench;

import java.io.PrintWriter;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;

import dev.dex.core.cache.DexEngineSettings;
import dev.dex.core.cache.DexEngine;
import dev.dex.core.cache.DexSession;
import dev.dex.core.log.RedoLogDescriptor;
import dev.dex.core.log.RedoLogSettings;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.SortedEntries;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;
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
 * How long a takeover takes as a function of the redo log's length: an owner updates R keys of a
 * bulk-loaded partition (each write committed to the log on its own) and vanishes without writing a page
 * back; a new owner acquires the partition, which replays the R records and writes the replayed pages back.
 * One row per R.
 */
@Command(name = "dex bench --takeover", mixinStandardHelpOptions = true, usageHelpAutoWidth = true,
        description = "Measures a partition's takeover (redo log replay) time against the log's length.")
public final class TakeoverBenchCommand implements Callable<Integer> {
    private static final int CHUNK = 1 << 20;

    @Spec
    CommandSpec spec;

    @Option(names = "--fabric", paramLabel = "TRANSPORT", defaultValue = "local",
            description = "local or tcp (the memory node in this JVM serves its region over loopback TCP) (default: ${DEFAULT-VALUE}).")
    private String fabric;

    @Option(names = "--latency-ns", paramLabel = "NS", defaultValue = "0",
            description = "Latency spun before every verb, e.g. 2000 for RDMA (default: ${DEFAULT-VALUE}).")
    private long latencyNs;

    @Option(names = "--keys", paramLabel = "N", defaultValue = "200000", converter = CountConverter.class,
            description = "Keys bulk-loaded into the partition (default: ${DEFAULT-VALUE}).")
    private long keys;

    @Option(names = "--records", paramLabel = "R", split = ",", defaultValue = "0,1000,4000,13000,50000",
            converter = CountConverter.class,
            description = "Log lengths to replay, comma-separated; 13000 is about half of the default 1 MiB log,"
                    + " the most a takeover replays with the shipped settings (default: ${DEFAULT-VALUE}).")
    private List<Long> records;

    public static CommandLine commandLine() {
        return new CommandLine(new TakeoverBenchCommand());
    }

    @Override
    public Integer call() {
        check(fabric.equals("local") || fabric.equals("tcp"), "--fabric must be local or tcp: " + fabric);
        check(latencyNs >= 0 && latencyNs <= 1_000_000, "--latency-ns must be in [0, 1000000]: " + latencyNs);
        check(keys >= 1 && keys <= 10_000_000, "--keys must be in [1, 10m]: " + keys);
        for (long r : records) {
            check(r >= 0 && r <= 1_000_000, "--records must each be in [0, 1m]: " + r);
        }
        PrintWriter out = spec.commandLine().getOut();
        out.printf(Locale.ROOT, "takeover of one partition of %,d keys, fabric %s, %,d ns per verb%n", keys, fabric, latencyNs);
        out.printf(Locale.ROOT, "%10s %10s %8s %12s %14s%n", "records", "replayed", "pages", "takeover ms", "us/record");
        out.flush();
        for (long r : records) {
            long[] row = measure((int) r);
            out.printf(Locale.ROOT, "%,10d %,10d %,8d %12.1f %14s%n", r, row[0], row[1], row[2] / 1e6,
                    r == 0 ? "-" : String.format(Locale.ROOT, "%.2f", row[2] / 1e3 / r));
            out.flush();
        }
        return 0;
    }

    /** {records replayed, pages written back, takeover nanoseconds}. */
    private long[] measure(int records) {
        long logBytes = Math.max(RedoLogSettings.DEFAULT_BYTES, 2L * (records + 1_000) * RedoLogDescriptor.RECORD_LENGTH);
        RedoLogSettings log = RedoLogSettings.ON.withBytes(logBytes);
        long region = (keys * 40 + logBytes) * 2 + (64L << 20);
        region = (region + CHUNK - 1) / CHUNK * CHUNK;
        boolean tcp = fabric.equals("tcp");
        try (Fabric memorySide = tcp ? new TcpFabric(TcpSettings.DEFAULTS, 0) : new LocalFabric(latencyNs);
             Fabric computeSide = tcp ? new TcpFabric(TcpSettings.DEFAULTS, latencyNs) : null) {
            Fabric client = tcp ? computeSide : memorySide;
            ExportedRegion exported = memorySide.export(0, region, CHUNK);
            Map<Integer, String> servers = Map.of(0, exported.endpoint());
            try (RemoteMemory admin = client.connect(servers)) {
                long[] k = new long[(int) keys];
                long[] v = new long[(int) keys];
                for (int i = 0; i < keys; i++) {
                    k[i] = i + 1;
                    v[i] = i + 1;
                }
                BulkLoader.formatAndLoad(admin, TreeSettings.defaults(), SortedEntries.of(k, v), loaded -> { });
                PartitionTable.store(admin, PartitionTable.ofUpperBounds());
            }
            DexEngineSettings config = DexEngineSettings.withCache(dev.dex.core.cache.EngineMode.NO_OFFLOAD, 256L << 20);
            RemoteMemory ownerMemory = client.connect(servers);
            DexEngine owner = DexEngine.open(ownerMemory, config, null, log);
            owner.acquire(0);
            SplittableRandom random = new SplittableRandom(records);
            try (DexSession session = owner.newSession()) {
                for (int i = 0; i < records; i++) {
                    session.put(random.nextLong(1, keys + 1), random.nextLong());
                }
            }
            // The owner vanishes: no release, nothing written back; its connection just goes away.
            ownerMemory.close();
            try (RemoteMemory heirMemory = client.connect(servers)) {
                DexEngine heir = DexEngine.open(heirMemory, config, null, log);
                DexEngine.AcquireReport report = heir.acquireReport(0);
                return new long[] {report.replayed(), report.pages(), report.nanos()};
            }
        }
    }

    private void check(boolean ok, String message) {
        if (!ok) {
            throw new ParameterException(spec.commandLine(), message);
        }
    }
}
