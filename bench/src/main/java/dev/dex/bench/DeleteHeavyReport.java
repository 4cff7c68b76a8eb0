package dev.dex.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

import com.fasterxml.jackson.databind.node.ObjectNode;

import dev.dex.core.cache.DexEngine;
import dev.dex.core.node.KeyFormat;
import dev.dex.core.tree.BulkLoader;
import dev.dex.core.tree.TreeSettings;
import dev.dex.core.tree.TreeValidator;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.local.LocalFabric;

/**
 * What a delete-heavy run leaves: the nodes of the tree in remote memory once the engines wrote every page back,
 * against the nodes a bulk load of the keys left would take (the same fill factor and key width, loaded into a
 * scratch region of its own). The engines merge leaves that deletes leave sparse as they go ({@code docs/merges.md});
 * the report also counts the tree after the sweep a compute node runs once a partition's deletes stopped
 * ({@code DexEngine.sweep}: a pass over every partition with enough deletes), what an idle index settles to.
 *
 * @param nodes         the tree's nodes after the run, every level
 * @param leaves        its leaves
 * @param emptyLeaves   its leaves without an entry
 * @param entries       the keys left
 * @param bulkNodes     the nodes of a tree bulk-loaded with that many keys
 * @param settledNodes  the tree's nodes after the sweep (= nodes for engines without merges)
 * @param settledLeaves its leaves
 */
record DeleteHeavyReport(long nodes, long leaves, long emptyLeaves, long entries, long bulkNodes, long settledNodes,
                         long settledLeaves) {
    private static final int SCRATCH_CHUNK = 64 << 10;

    double ratio() {
        return (double) nodes / bulkNodes;
    }

    double settledRatio() {
        return (double) settledNodes / bulkNodes;
    }

    /**
     * Writes every dirty page back, validates and counts the remote tree; then sweeps each DEX engine's partitions,
     * closes the engines and counts it again.
     */
    static DeleteHeavyReport measure(EngineCluster engines, BenchSettings config) {
        List<DexEngine> dex = new ArrayList<>();
        for (Object engine : engines.engines()) {
            if (engine instanceof DexEngine d) {
                dex.add(d);
            }
        }
        TreeValidator.Report tree = null;
        if (!dex.isEmpty()) {
            dex.forEach(DexEngine::repair); // every dirty page written back: remote memory holds the whole tree
            tree = validate(engines);
            // What a compute node's sweep does once the deletes stopped (dex.compute.merge-sweep), without its wait.
            dex.forEach(engine -> engine.sweep(0));
        }
        engines.closeEngines();
        TreeValidator.Report settled = validate(engines);
        if (tree == null) {
            tree = settled;
        }
        long[] perLevel = tree.nodesPerLevel();
        return new DeleteHeavyReport(Arrays.stream(perLevel).sum(), perLevel[0], tree.emptyLeaves(), tree.entries(),
                bulkLoadedNodes(tree.entries(), config.keyBytes()), Arrays.stream(settled.nodesPerLevel()).sum(),
                settled.nodesPerLevel()[0]);
    }

    private static TreeValidator.Report validate(EngineCluster engines) {
        try (RemoteMemory memory = engines.connect()) {
            return TreeValidator.validateWords(memory, (key, value) -> { });
        }
    }

    /** The nodes of a tree bulk-loaded with {@code entries} keys of {@code keyBytes} (one leaf for none). */
    static long bulkLoadedNodes(long entries, int keyBytes) {
        if (entries == 0) {
            return 1;
        }
        long estimate = EngineFactory.estimatedTreeBytes(entries, KeyFormat.of(keyBytes));
        long region = (2 * estimate / SCRATCH_CHUNK + 64) * SCRATCH_CHUNK;
        try (LocalFabric fabric = new LocalFabric()) {
            ExportedRegion exported = fabric.export(0, region, SCRATCH_CHUNK);
            try (RemoteMemory memory = fabric.connect(exported.serverId())) {
                BulkLoader.Result loaded = BulkLoader.formatAndLoad(memory, TreeSettings.defaults().withKeyBytes(keyBytes),
                        new BenchKeys(keyBytes).entries(new KeySpace(entries).entries()), n -> { });
                return loaded.leaves() + loaded.innerNodes();
            }
        }
    }

    /** The report's line of the summary. */
    String line() {
        return String.format(Locale.ROOT, "delete-heavy  the tree keeps %,d nodes (%,d leaves, %,d of them empty) for %,d keys;"
                        + " a bulk load of %,d keys takes %,d: %.2fx; after the sweep %,d nodes"
                        + " (%,d leaves): %.2fx (docs/merges.md)",
                nodes, leaves, emptyLeaves, entries, entries, bulkNodes, ratio(), settledNodes, settledLeaves, settledRatio());
    }

    /** Adds the report to a run's JSON object as {@code deleteHeavy}. */
    void addTo(ObjectNode root) {
        ObjectNode node = root.putObject("deleteHeavy");
        node.put("nodes", nodes);
        node.put("leaves", leaves);
        node.put("emptyLeaves", emptyLeaves);
        node.put("entries", entries);
        node.put("bulkLoadedNodes", bulkNodes);
        node.put("ratio", ratio());
        node.put("settledNodes", settledNodes);
        node.put("settledLeaves", settledLeaves);
        node.put("settledRatio", settledRatio());
    }
}
