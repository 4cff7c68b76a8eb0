package dev.dex.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.pekko.actor.NoSerializationVerificationNeeded;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.LogCapturingExtension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

import dev.dex.actors.client.DexClient;
import dev.dex.actors.node.ComputeNode;
import dev.dex.actors.node.MemoryNode;
import dev.dex.actors.partition.Ops;
import dev.dex.actors.partition.Partition;
import dev.dex.actors.partition.PartitionRouter;
import dev.dex.core.node.LeafOps;
import dev.dex.core.offload.OffloadRequest;

/**
 * Every message that may cross the network survives Jackson CBOR (the binding in this module's
 * {@code reference.conf}) with every field intact, including nulls, NaN, extreme longs and arrays; and
 * every such message type of the module has a sample here, so a new one cannot ship untested.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
@ExtendWith(LogCapturingExtension.class)
class MessageSerializationTest {

    @JUnit5TestKit
    ActorTestKit testKit = new JUnit5TestKitBuilder().build();

    /** Realistic instances of every serializable message, several per type where a field may be null or empty. */
    private List<Object> samples() {
        ActorRef<MemoryNode.Description> descriptions = testKit.<MemoryNode.Description>createTestProbe().getRef();
        ActorRef<MemoryNode.ChunkGranted> chunks = testKit.<MemoryNode.ChunkGranted>createTestProbe().getRef();
        ActorRef<MemoryNode.OffloadResult> offloads = testKit.<MemoryNode.OffloadResult>createTestProbe().getRef();
        ActorRef<MemoryNode.Command> memoryNode = testKit.<MemoryNode.Command>createTestProbe().getRef();
        ActorRef<ComputeNode.PartitionTableReply> tables = testKit.<ComputeNode.PartitionTableReply>createTestProbe().getRef();
        ActorRef<ComputeNode.Status> statuses = testKit.<ComputeNode.Status>createTestProbe().getRef();
        ActorRef<Ops.Results> results = testKit.<Ops.Results>createTestProbe().getRef();
        ActorRef<Ops.ResultsBundle> bundles = testKit.<Ops.ResultsBundle>createTestProbe().getRef();
        ActorRef<PartitionRouter.Stats> stats = testKit.<PartitionRouter.Stats>createTestProbe().getRef();
        ActorRef<DexClient.Reply> replies = testKit.<DexClient.Reply>createTestProbe().getRef();
        ActorRef<DexClient.ScanReply> scanReplies = testKit.<DexClient.ScanReply>createTestProbe().getRef();
        ActorRef<MemoryNode.Replicated> replicated = testKit.<MemoryNode.Replicated>createTestProbe().getRef();
        ActorRef<dev.dex.actors.node.ReplicaGroups> groupReplies = testKit.<dev.dex.actors.node.ReplicaGroups>createTestProbe().getRef();
        MemoryNode.Description backup = new MemoryNode.Description(0, 64L << 20, "10.1.2.4:7400", memoryNode,
                new MemoryNode.Replica(MemoryNode.Replica.BACKUP_ROLE, 4, 1_234_567, false, 1L << 20, null));
        dev.dex.actors.node.ReplicaGroups.Group group = new dev.dex.actors.node.ReplicaGroups.Group(0, 9,
                new dev.dex.actors.node.ReplicaGroups.Replica(memoryNode, "10.1.2.3:7400"),
                List.of(new dev.dex.actors.node.ReplicaGroups.Replica(memoryNode, "10.1.2.4:7400")));

        Ops.Op get = new Ops.Op(Ops.GET, 42, 0, 0);
        Ops.Op put = new Ops.Op(Ops.PUT, Long.MAX_VALUE, Long.MIN_VALUE, 0);
        Ops.Op scan = new Ops.Op(Ops.SCAN, -7, 0, Ops.MAX_SCAN);
        Ops.Result scanned = new Ops.Result(Ops.OK, true, 0, new long[] {-7, 3, 1L << 40}, new long[] {70, -30, Long.MAX_VALUE},
                62_501, null);
        Ops.Result found = Ops.Result.of(true, -99);
        Ops.Result refused = Ops.Result.error(Ops.NOT_HELD, "partition 3 is moving to another compute node");
        return List.of(
                new MemoryNode.Describe(descriptions),
                new MemoryNode.Description(3, 64L << 30, "10.1.2.3:7400", memoryNode),
                backup,
                new MemoryNode.Replica(MemoryNode.Replica.BACKUP_ROLE, 7, Long.MAX_VALUE, true, 0,
                        "the stream's connection from the primary of view 7 closed"),
                new MemoryNode.Replicate(MemoryNode.Replicate.INSTALL_VIEW, 5, List.of("10.1.2.3:7400", "10.1.2.4:7400"), replicated),
                new MemoryNode.Replicate(MemoryNode.Replicate.BECOME_BACKUP, 1, List.of(), replicated),
                new MemoryNode.Replicated(backup, null),
                new MemoryNode.Replicated(backup, "this backup's copy is not complete"),
                new dev.dex.actors.node.ReplicaCoordinator.GetGroups(groupReplies),
                new dev.dex.actors.node.ReplicaReports.PrimarySuspected(backup),
                new dev.dex.actors.node.ReplicaReports.PrimarySuspected(backup, true),
                new dev.dex.actors.node.ReplicaReports.BackupsSuspected(backup,
                        java.util.Map.of("10.1.2.4:7400", "the connection to the backup closed", "10.1.2.5:7400", "silent")),
                new dev.dex.actors.node.ReplicaReports.BackupsSuspected(backup, java.util.Map.of("r2", "gone"), java.util.Set.of("r2")),
                new MemoryNode.Replica(MemoryNode.Replica.SOLE_ROLE, 0, 0, true, 0, null, 0x8000_0000_0000_0001L, false,
                        MemoryNode.Replica.PRIMARY_ROLE, 12),
                new dev.dex.actors.node.ReplicaGroups.Replica(memoryNode, "10.1.2.6:7400", -5L),
                new dev.dex.actors.node.ReplicaGroups(3, List.of(group)),
                dev.dex.actors.node.ReplicaGroups.EMPTY,
                group,
                group.primary(),
                new MemoryNode.AllocateChunk(chunks),
                new MemoryNode.ChunkGranted(0x0003_0000_0001_0000L, null),
                new MemoryNode.ChunkGranted(0, "memory server 3 is full"),
                new MemoryNode.FenceMember("pekko://dex@10.0.0.7:25520", -4_611_686_018_427_387_904L,
                        testKit.<MemoryNode.MemberFenced>createTestProbe().getRef()),
                new MemoryNode.MemberFenced("pekko://dex@10.0.0.7:25520", 42L, "pekko://dex@10.0.0.2:25520", true, null),
                new MemoryNode.MemberFenced("pekko://dex@10.0.0.7:25520", 42L, "pekko://dex@10.0.0.2:25520", false,
                        "the shm fabric cannot fence"),
                new MemoryNode.Offload(17, OffloadRequest.WRITE, LeafOps.PUT, 5, 7L << 40, 1234, -5678, 0x0001_0000_0000_4400L,
                        1_795_000_000_000L, offloads),
                new MemoryNode.Offload(18, OffloadRequest.READ, LeafOps.LOOKUP, 255, 0, Long.MAX_VALUE, 0, 0x0001_0000_0000_4400L,
                        0, offloads),
                new MemoryNode.OffloadResult(17, OffloadRequest.OK, true, -42, new long[] {0x0001_0000_0000_4400L},
                        new long[] {8}, 1),
                new MemoryNode.OffloadResult(18, OffloadRequest.REJECTED, false, 0, new long[0], new long[0], 0),
                new ComputeNode.GetPartitionTable(tables),
                new ComputeNode.PartitionTableReply(new long[] {62_499, 124_999, Long.MAX_VALUE - 1}, new int[] {0, 3, 1, 2}, 4),
                new ComputeNode.PartitionTableReply(new long[] {62_499}, null, 2),
                new ComputeNode.GetStatus(statuses),
                new ComputeNode.Status("pekko://dex@127.0.0.1:25520", List.of(0, 5, 15), 1_000_000_000_000L, 12, 3, 0,
                        Long.MAX_VALUE, 0.8125, 7, List.of(), List.of()),
                new ComputeNode.Status("pekko://dex@127.0.0.1:25521", List.of(), 0, 0, 0, 0, 0, Double.NaN, 0, List.of(1, 3),
                        List.of("memory server 3 is lost: every replica of its group in view 7 is out of the cluster (...)")),
                new ComputeNode.Status("pekko://dex@127.0.0.1:25522", List.of(2, 9), 4, 3, 0, 0, 4096, 0.5, 0, List.of(), List.of(),
                        "jvm-1", 1 << 20, List.of(1_234.5, 0.0), 10, 6, 2, 1),
                new Partition.Execute(42, List.of(get, put, scan), results),
                new Partition.Execute(42, 7, 0x5eed, 7, -3, 6, List.of(put), results),
                Partition.Handoff.INSTANCE,
                get,
                put,
                scan,
                scanned,
                found,
                refused,
                new Ops.Results(List.of(scanned, found, refused)),
                new Ops.Results(List.of()),
                new Ops.Results(5, List.of(found), "pekko://dex@127.0.0.1:25520", Long.MIN_VALUE | 12),
                new Ops.ResultsBundle(List.of(new Ops.Results(9, List.of(found, refused), "pekko://dex@127.0.0.1:25520", 2),
                        new Ops.Results(10, List.of(scanned), null))),
                new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(42, 9, List.of(get, put)),
                        new PartitionRouter.Routed(0, 10, List.of(scan))), bundles),
                new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(42, 11, 5, 10, List.of(put))), bundles, 0x5eed),
                new PartitionRouter.GetStats(stats),
                new PartitionRouter.Stats(12, Long.MAX_VALUE),
                new DexClient.Get(Long.MIN_VALUE + 1, replies),
                new DexClient.Put(-1, Long.MAX_VALUE, replies),
                new DexClient.Delete(Long.MAX_VALUE, replies),
                new DexClient.Scan(Long.MIN_VALUE, Ops.MAX_SCAN * 16, scanReplies),
                new DexClient.Reply(true, -1, null),
                new DexClient.Reply(false, 0, "key Long.MIN_VALUE is reserved (it is the minus-infinity fence)"),
                new DexClient.ScanReply(new long[] {1, 2, 3}, new long[] {10, 20, 30}, null),
                new DexClient.ScanReply(new long[] {1}, new long[] {10}, "gave up after 300 attempts"));
    }

    @Test
    void everyMessageSurvivesCborWithEveryFieldIntact() {
        for (Object message : samples()) {
            Object back = testKit.serializationTestKit().verifySerialization(message, false);
            if (!(message instanceof Enum<?>)) {
                assertNotSame(message, back, "a copy came back, not the message itself");
            }
            assertSameFields(message, back, message.getClass().getSimpleName());
        }
    }

    @Test
    void everySerializableMessageTypeHasARoundTripSample() throws Exception {
        Set<String> sampled = samples().stream().map(m -> m.getClass().getName()).collect(Collectors.toCollection(TreeSet::new));
        Set<String> declared = new TreeSet<>(serializableMessageTypes());
        assertTrue(declared.contains(Ops.Op.class.getName()) && declared.contains(Partition.Handoff.class.getName()),
                "the class scan finds the module's messages: " + declared);
        Set<String> missing = new TreeSet<>(declared);
        missing.removeAll(sampled);
        assertEquals(Set.of(), missing, "message types without a round-trip sample in samples()");
        assertEquals(declared, sampled);
    }

    /**
     * An actor's internal messages (what it pipes or schedules to itself, adapter wrappers) have no serializer,
     * so no other process can send them: not by serializing one, and not by naming its class as the manifest of
     * a CBOR payload (a forged {@code Done} used to be accepted and could drive a partition's count of batches
     * in flight negative, blocking every handoff).
     */
    @Test
    void internalMessagesCannotBeSerializedNorForged() throws Exception {
        var serialization = org.apache.pekko.serialization.SerializationExtension.get(
                org.apache.pekko.actor.typed.javadsl.Adapter.toClassic(testKit.system()));
        List<Class<?>> commands = List.of(ComputeNode.Command.class, MemoryNode.Command.class, Partition.Command.class,
                PartitionRouter.Command.class, DexClient.Command.class);
        List<String> internal = new ArrayList<>();
        for (Class<?> type : packageClasses()) {
            if (type.isInterface() || commands.stream().noneMatch(command -> command.isAssignableFrom(type))
                    || !NoSerializationVerificationNeeded.class.isAssignableFrom(type)) {
                continue;
            }
            internal.add(type.getSimpleName());
            assertFalse(CborSerializable.class.isAssignableFrom(type), type + " is internal but marked serializable");
            try {
                // Enums are java.io.Serializable: bound to Java serialization, which is disabled.
                assertInstanceOf(org.apache.pekko.serialization.DisabledJavaSerializer.class, serialization.serializerFor(type),
                        type + " has a serializer");
            } catch (java.io.NotSerializableException none) {
                // no serializer at all: as it should be
            }
        }
        assertTrue(internal.containsAll(List.of("Done", "Acquired", "Released", "Described",
                "BatchAnswered", "Answered")), "the scan finds the internal messages: " + internal);

        // A CBOR payload of a real message, with an internal message's class as its manifest: refused.
        Object granted = new MemoryNode.ChunkGranted(4096, null);
        var cbor = serialization.findSerializerFor(granted);
        byte[] bytes = cbor.toBinary(granted);
        assertTrue(serialization.deserialize(bytes, cbor.identifier(), MemoryNode.ChunkGranted.class.getName()).isSuccess());
        String forged = Partition.class.getName() + "$Done";
        var refused = serialization.deserialize(bytes, cbor.identifier(), forged);
        assertTrue(refused.isFailure(), "a payload named " + forged + " was deserialized: " + refused);
    }

    /** The classes of the module's main code: this package and the packages below it. */
    private static List<Class<?>> packageClasses() throws IOException, URISyntaxException, ClassNotFoundException {
        Path classes = Path.of(CborSerializable.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        Path dir = classes.resolve(CborSerializable.class.getPackageName().replace('.', '/'));
        assertTrue(Files.isDirectory(dir), "main classes are a directory here: " + dir);
        List<Class<?>> types = new ArrayList<>();
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                String fileName = classes.relativize(file).toString().replace(java.io.File.separatorChar, '/');
                if (fileName.endsWith(".class") && !fileName.endsWith("package-info.class")) {
                    types.add(Class.forName(fileName.substring(0, fileName.length() - ".class".length()).replace('/', '.'), false,
                            CborSerializable.class.getClassLoader()));
                }
            }
        }
        return types;
    }

    /**
     * The concrete classes of the module's main code that implement {@link CborSerializable}, minus
     * local-only ones ({@link NoSerializationVerificationNeeded}: replies an actor pipes to itself), and the
     * messages bound to {@link dev.dex.actors.partition.BatchSerializer} by class.
     */
    private static List<String> serializableMessageTypes() throws IOException, URISyntaxException, ClassNotFoundException {
        List<String> names = new ArrayList<>();
        for (Class<?> type : packageClasses()) {
            if (CborSerializable.class.isAssignableFrom(type) && !type.isInterface() && !type.isAnonymousClass()
                    && !NoSerializationVerificationNeeded.class.isAssignableFrom(type)) {
                names.add(type.getName());
            }
        }
        names.add(Partition.Execute.class.getName());
        names.add(PartitionRouter.Bundle.class.getName());
        return names;
    }

    /**
     * Records compared component by component, arrays by content, lists element by element (of any list
     * class: Jackson builds an ArrayList), NaN equal to NaN, everything else by class and equals.
     */
    private static void assertSameFields(Object expected, Object actual, String path) {
        if (expected == null || actual == null) {
            assertEquals(expected, actual, path);
            return;
        }
        if (expected instanceof List<?> list) {
            List<?> other = assertInstanceOf(List.class, actual, path);
            assertEquals(list.size(), other.size(), path + ".size");
            for (int i = 0; i < list.size(); i++) {
                assertSameFields(list.get(i), other.get(i), path + "[" + i + "]");
            }
            return;
        }
        assertEquals(expected.getClass(), actual.getClass(), path);
        if (expected instanceof long[] longs) {
            assertArrayEquals(longs, (long[]) actual, path);
        } else if (expected instanceof int[] ints) {
            assertArrayEquals(ints, (int[]) actual, path);
        } else if (expected instanceof Double d) {
            assertEquals(0, Double.compare(d, (Double) actual), path + ": " + d + " vs " + actual);
        } else if (expected.getClass().isRecord()) {
            for (RecordComponent component : expected.getClass().getRecordComponents()) {
                try {
                    assertSameFields(component.getAccessor().invoke(expected), component.getAccessor().invoke(actual),
                            path + "." + component.getName());
                } catch (ReflectiveOperationException e) {
                    throw new AssertionError(path + "." + component.getName() + " is not readable", e);
                }
            }
        } else {
            assertEquals(expected, actual, path);
        }
    }
}
