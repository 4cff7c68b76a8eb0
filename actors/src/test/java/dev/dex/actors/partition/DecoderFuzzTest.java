package dev.dex.actors.partition;

import java.io.NotSerializableException;
import java.util.UUID;

import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import com.typesafe.config.ConfigFactory;

import dev.dex.actors.node.Fabrics;
import dev.dex.core.offload.OffloadRequest;
import dev.dex.core.offload.SubtreeExecutor;
import dev.dex.core.partition.OwnershipTable;
import dev.dex.core.partition.PartitionTable;
import dev.dex.core.tree.Superblock;
import dev.dex.core.tree.SuperblockDescriptor;
import dev.dex.core.tree.TreeSettings;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.RemoteMemory;

/**
 * Fuzz tests (Jazzer) of what a node decodes from others: the batch wire format (all four messages), offload
 * requests as a memory node validates and runs them, and the superblock and partition table a node reads from a
 * region. Garbage must end in the decoder's own clear refusal, never in another exception, an error (an array
 * sized by a hostile count), a crash or a hang.
 *
 * <p>{@code mvn -B verify} fuzzes them for 20 s ({@code JAZZER_FUZZ=1} in the root pom's {@code fuzz} execution;
 * without it, JUnit runs only the inputs saved under {@code src/test/resources}, as regression tests). A longer
 * run: {@link DecoderLongFuzz}. A finding is saved by Jazzer under
 * {@code src/test/resources/dev/dex/actors/partition/DecoderFuzzTestInputs/decoders}: commit it with the fix, and it stays
 * a regression test.
 */
class DecoderFuzzTest {
    private static final ActorSystem<Void> SYSTEM = ActorSystem.create(Behaviors.empty(), "fuzz",
            ConfigFactory.parseString("pekko.actor.provider = local").withFallback(ConfigFactory.load()));
    private static final BatchSerializer SERIALIZER = new BatchSerializer((ExtendedActorSystem) Adapter.toClassic(SYSTEM));
    private static final int CHUNK = 64 << 10;
    private static final String FABRIC = "fuzz-" + UUID.randomUUID();
    /** A region with a formatted tree and table, read by the offloads; never written. */
    private static final ExportedRegion TREE;
    /** A region whose superblock each input overwrites. */
    private static final ExportedRegion SCRATCH;
    private static final RemoteMemory SCRATCH_MEMORY;
    private static final long ROOT;
    /** The tree's partitions, each owned at epoch 0. */
    private static final PartitionTable PARTITIONS = PartitionTable.equalWidth(4, 0, 1000);

    static {
        Fabric fabric = Fabrics.open(new Fabrics.Spec("local", FABRIC, null, 0));
        TREE = fabric.export(0, 16L * CHUNK, CHUNK);
        try (RemoteMemory memory = fabric.connect(0)) {
            Superblock.format(memory, TreeSettings.defaults().withSubtreeLevel(3));
            PartitionTable.store(memory, PARTITIONS);
            ROOT = Superblock.read(memory).root();
            for (int p = 0; p < PARTITIONS.count(); p++) {
                OwnershipTable.register(memory, PARTITIONS.count(), p, 0, PARTITIONS.lowerExclusive(p), PARTITIONS.upperInclusive(p), 8);
            }
        }
        Fabric scratch = Fabrics.open(new Fabrics.Spec("local", FABRIC + "-scratch", null, 0));
        SCRATCH = scratch.export(0, 4L * CHUNK, CHUNK);
        SCRATCH_MEMORY = scratch.connect(0);
    }

    /**
     * One input for one of the decoders, chosen by its first byte; what {@code mvn -B verify} fuzzes for 10 s
     * (Jazzer fuzzes one test per JVM, so the decoders share one).
     */
    @FuzzTest(maxDuration = "10s")
    void decoders(FuzzedDataProvider data) {
        fuzzOne(data);
    }

    static void fuzzOne(FuzzedDataProvider data) {
        switch (data.consumeInt(0, 2)) {
            case 0 -> batchFrame(data);
            case 1 -> offload(data);
            default -> superblock(data);
        }
    }

    // ==== the batch wire format ==============================================================================

    static void batchFrame(FuzzedDataProvider data) {
        String manifest = data.pickValue(new String[] {BatchSerializer.EXECUTE, BatchSerializer.RESULTS, BatchSerializer.BUNDLE,
                BatchSerializer.RESULTS_BUNDLE});
        boolean current = data.consumeBoolean();
        byte[] bytes = data.consumeRemainingAsBytes();
        if (current && bytes.length > 0) {
            bytes[0] = BatchSerializer.VERSION; // past the version check most of the time
        }
        try {
            SERIALIZER.fromBinary(bytes, manifest);
        } catch (NotSerializableException refused) {
            // the decoder's refusal, naming what is wrong: Artery logs it and drops the frame
        }
    }



    // ==== offload requests ===================================================================================

    /**
     * An offload as a memory node gets it (any phase, op, key and start), validated and, for a READ (which only
     * reads), run on a valid tree: a refusal ({@link IllegalArgumentException}) or a failed run (a
     * {@link RuntimeException}, which the memory node answers STALE) is fine; an error or a hang is not. A WRITE
     * changes the tree the next inputs run on, so it is only validated here.
     */
    static void offload(FuzzedDataProvider data) {
        int phase = data.consumeInt(-1, 3);
        int op = data.consumeInt(-1, 5);
        long key = data.consumeBoolean() ? data.consumeLong(0, 1000) : data.consumeLong();
        // Mostly the key's own partition at its owner's epoch, so that runs get past the ownership check.
        int partition = data.consumeBoolean() ? PARTITIONS.partitionOf(key) : data.consumeInt();
        long epoch = data.consumeBoolean() ? 0 : data.consumeLong();
        long value = data.consumeLong();
        long start = data.consumeBoolean() ? ROOT : data.consumeLong();
        OffloadRequest request;
        try {
            request = OffloadRequest.received(phase, op, partition, epoch, key, value, start);
        } catch (IllegalArgumentException refused) {
            return;
        }
        if (phase == OffloadRequest.WRITE) {
            return;
        }
        try {
            new SubtreeExecutor(0, TREE.region()).run(request);
        } catch (RuntimeException failed) {
            // answered STALE by the memory node
        }
    }



    // ==== the superblock and the partition table =============================================================

    /**
     * A superblock area of arbitrary bytes (as a broken or hostile memory node could hold), read the way nodes
     * read it: a clear {@link IllegalStateException} or {@link IllegalArgumentException}, or a result.
     */
    static void superblock(FuzzedDataProvider data) {
        int area = SuperblockDescriptor.PARTITION_BOUNDS_OFFSET + 64 * Long.BYTES;
        byte[] bytes = java.util.Arrays.copyOf(data.consumeBytes(area), area);
        long base = SuperblockDescriptor.ADDRESS & dev.dex.rdma.GlobalAddress.OFFSET_MASK;
        SCRATCH.region().putBytes(base, new org.agrona.concurrent.UnsafeBuffer(bytes), 0, area);
        try {
            Superblock.read(SCRATCH_MEMORY);
        } catch (IllegalStateException | IllegalArgumentException refused) {
            // a region without a valid tree
        }
        try {
            PartitionTable.load(SCRATCH_MEMORY);
        } catch (IllegalStateException | IllegalArgumentException refused) {
            // a region without a valid table
        }
    }


}
