package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.NotSerializableException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;

import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.SerializationExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The binary layout of batches: every field survives, the system picks this serializer for the hot messages
 * (and CBOR for the rest), and malformed frames fail with a reason instead of decoding into garbage.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class BatchSerializerTest {

    @JUnit5TestKit
    ActorTestKit testKit = new JUnit5TestKitBuilder().build();

    private BatchSerializer serializer() {
        return new BatchSerializer((ExtendedActorSystem) Adapter.toClassic(testKit.system()));
    }

    @Test
    void theSystemUsesItForBatchesAndCborForEverythingElse() {
        var serialization = SerializationExtension.get(Adapter.toClassic(testKit.system()));
        ActorRef<Ops.Results> replies = testKit.<Ops.Results>createTestProbe().getRef();
        assertInstanceOf(BatchSerializer.class, serialization.findSerializerFor(
                new Partition.Execute(1, 2, List.of(new Ops.Op(Ops.GET, 1, 0, 0)), replies)));
        assertInstanceOf(BatchSerializer.class, serialization.findSerializerFor(new Ops.Results(List.of())));
        for (Object control : List.of(Partition.Handoff.INSTANCE, new Ops.Op(Ops.GET, 1, 0, 0), Ops.Result.of(true, 1))) {
            String serializer = serialization.findSerializerFor(control).getClass().getSimpleName();
            assertTrue(serializer.contains("Jackson"), control + " goes in CBOR, not with " + serializer);
        }
    }

    @Test
    void anExecuteSurvivesWithEveryFieldAndItsReplyAddress() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.Results> replies = testKit.<Ops.Results>createTestProbe().getRef();
        List<Ops.Op> ops = List.of(new Ops.Op(Ops.GET, Long.MIN_VALUE + 1, 0, 0), new Ops.Op(Ops.PUT, Long.MAX_VALUE, Long.MIN_VALUE, 0),
                new Ops.Op(Ops.SCAN, -7, 0, Ops.MAX_SCAN), new Ops.Op(99, 5, -5, -1), new Ops.Op(-1, 0, 0, Integer.MIN_VALUE),
                new Ops.Op(Ops.PUT, new long[] {Long.MIN_VALUE, Long.MIN_VALUE + 1, -1, Long.MAX_VALUE}, 4, 0));
        Partition.Execute execute = new Partition.Execute(1_023, Long.MAX_VALUE, -3, Long.MIN_VALUE, 17, Long.MAX_VALUE - 1, ops, replies);
        byte[] bytes = serializer.toBinary(execute);
        assertEquals(1 + 6 * 8 + 1 + 4 + serializedPathLength(replies) + 4 + ops.size() * 25 + 3 * 8, bytes.length,
                "25 bytes per operation, 8 more per further word of a wide key");
        Partition.Execute back = (Partition.Execute) serializer.fromBinary(bytes, serializer.manifest(execute));
        assertEquals(execute, back);
        assertSame(back.replyTo(), ((Partition.Execute) serializer.fromBinary(bytes, "E")).replyTo(), "the address resolves once");
    }

    @Test
    void resultsSurviveWithScansErrorsAndAnEmptyScanThatStillSaysWhereToGoOn() throws Exception {
        BatchSerializer serializer = serializer();
        SplittableRandom random = new SplittableRandom(7);
        long[] keys = random.longs(Ops.MAX_SCAN).sorted().toArray();
        long[] values = random.longs(Ops.MAX_SCAN).toArray();
        List<Ops.Result> list = List.of(
                Ops.Result.of(true, -99),
                Ops.Result.of(false, 0),
                new Ops.Result(Ops.OK, true, 0, keys, values, 62_501, null),
                new Ops.Result(Ops.OK, false, 0, new long[0], new long[0], 1_000, null),
                new Ops.Result(Ops.OK, false, 0, new long[0], new long[0], Long.MIN_VALUE, null),
                Ops.Result.error(Ops.NOT_HELD, "partition 3 is moving to another compute node"),
                Ops.Result.error(Ops.OVERLOADED, "é ünïcode ✓"),
                new Ops.Result(Ops.FAILED, false, 0, new long[] {1}, new long[] {2}, 3, "a part, then a failure"),
                new Ops.Result(Ops.OK, true, 0, new long[] {1, 2, 3, 4, 5, 6}, new long[] {7, 8}, 9, null, 3),
                new Ops.Result(Ops.OK, false, 0, new long[0], new long[0], Long.MIN_VALUE, null, 8));
        for (Ops.Results results : List.of(new Ops.Results(Long.MIN_VALUE, list, "pekko://dex@127.0.0.1:25520", Long.MIN_VALUE + 9),
                new Ops.Results(3, List.of(), null, 4))) {
            Ops.Results back = (Ops.Results) serializer.fromBinary(serializer.toBinary(results), serializer.manifest(results));
            assertEquals(results.batch(), back.batch());
            assertEquals(results.epoch(), back.epoch());
            assertEquals(results.host(), back.host());
            assertEquals(results.results().size(), back.results().size());
            for (int i = 0; i < results.results().size(); i++) {
                Ops.Result a = results.results().get(i);
                Ops.Result b = back.results().get(i);
                String at = "result " + i;
                assertEquals(a.status(), b.status(), at);
                assertEquals(a.found(), b.found(), at);
                assertEquals(a.value(), b.value(), at);
                assertArrayEquals(a.keys(), b.keys(), at);
                assertArrayEquals(a.values(), b.values(), at);
                assertEquals(a.next(), b.next(), at);
                assertEquals(a.error(), b.error(), at);
                assertEquals(a.keyWords(), b.keyWords(), at);
            }
        }
        assertEquals(1 + 8 + 8 + 1 + 4 + 4 + 10, serializer.toBinary(new Ops.Results(1, List.of(Ops.Result.of(true, 1)), null)).length,
                "a plain result takes 10 bytes");
    }

    @Test
    void anErrorMessageTooLongForTheWireIsShortenedNotDropped() throws Exception {
        BatchSerializer serializer = serializer();
        String huge = "x".repeat(WireLimits.MAX_STRING * 2);
        Ops.Results results = new Ops.Results(1, List.of(Ops.Result.error(Ops.FAILED, huge)), null);
        Ops.Results back = (Ops.Results) serializer.fromBinary(serializer.toBinary(results), "R");
        String error = back.results().get(0).error();
        assertTrue(error.startsWith("xxx") && error.endsWith("...") && error.length() < WireLimits.MAX_STRING, error.length() + "");
    }

    @Test
    void aFullBatchOfLongErrorsAndAFullScanStillFitsArterysFrame() throws Exception {
        BatchSerializer serializer = serializer();
        List<Ops.Result> list = new ArrayList<>();
        list.add(new Ops.Result(Ops.OK, true, 0, new long[Ops.MAX_SCAN], new long[Ops.MAX_SCAN], 5, null));
        for (int i = 1; i < Ops.MAX_BATCH; i++) {
            list.add(Ops.Result.error(Ops.FAILED, "corrupt node " + i + ": " + "y".repeat(8_000)));
        }
        byte[] bytes = serializer.toBinary(new Ops.Results(1, list, "pekko://dex@127.0.0.1:25520"));
        assertTrue(bytes.length < 256 * 1024 - 1024, "an answer of " + bytes.length + " bytes");
        Ops.Results back = (Ops.Results) serializer.fromBinary(bytes, "R");
        String error = back.results().get(7).error();
        assertTrue(error.startsWith("corrupt node 7: yyy") && error.endsWith("..."), error);
        assertEquals(Ops.MAX_SCAN, back.results().get(0).keys().length);
    }

    @Test
    void malformedFramesFailWithTheReason() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.Results> replies = testKit.<Ops.Results>createTestProbe().getRef();
        byte[] execute = serializer.toBinary(new Partition.Execute(1, 2, List.of(new Ops.Op(Ops.GET, 1, 0, 0),
                new Ops.Op(Ops.PUT, 2, 3, 0)), replies));
        byte[] results = serializer.toBinary(new Ops.Results(2, List.of(new Ops.Result(Ops.OK, true, 0, new long[] {1, 2},
                new long[] {3, 4}, 5, null), Ops.Result.error(Ops.FAILED, "bad")), "host"));

        for (int cut = 0; cut < execute.length; cut++) {
            assertRefused(serializer, Arrays.copyOf(execute, cut), "E", "");
        }
        for (int cut = 0; cut < results.length; cut++) {
            assertRefused(serializer, Arrays.copyOf(results, cut), "R", "");
        }
        assertRefused(serializer, Arrays.copyOf(execute, execute.length + 1), "E", "1 bytes after the end of a Execute");
        assertRefused(serializer, execute, "X", "unknown manifest 'X'");

        byte[] wrongVersion = execute.clone();
        wrongVersion[0] = 9;
        assertRefused(serializer, wrongVersion, "E", "wire version 9");

        int replyAt = 1 + 6 * 8 + 1;
        int countAt = replyAt + 4 + serializedPathLength(replies);
        assertRefused(serializer, withInt(execute, countAt, -1), "E", "-1 operations");
        assertRefused(serializer, withInt(execute, countAt, BatchSerializer.WIRE_MAX_OPS + 1), "E",
                (BatchSerializer.WIRE_MAX_OPS + 1) + " operations (at most " + BatchSerializer.WIRE_MAX_OPS + ")");
        assertRefused(serializer, withInt(execute, countAt, 3), "E", "3 operations announced, 50 bytes left");
        byte[] wideKey = execute.clone();
        wideKey[countAt + 4 + 4] = 8;
        assertRefused(serializer, wideKey, "E", "an operation's key of 9 words (1 to 8)");
        byte[] cutKey = execute.clone();
        cutKey[countAt + 4 + 25 + 4] = 7;
        assertRefused(serializer, cutKey, "E", "");
        assertRefused(serializer, withInt(execute, replyAt, -1), "E", "without a reply address");
        assertRefused(serializer, withInt(execute, replyAt, -7), "E", "replyTo of -7 bytes");
        assertRefused(serializer, withInt(execute, replyAt, Integer.MAX_VALUE), "E", "replyTo of " + Integer.MAX_VALUE + " bytes");

        byte[] path = "pekko://dex@10.0.0.1:25520/user/x#notanumber".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        ByteBuffer badPath = ByteBuffer.allocate(replyAt + 4 + path.length + 4);
        badPath.put(BatchSerializer.VERSION).putLong(1).putLong(2).putLong(3).putLong(2).putLong(1).putLong(0).put((byte) 0)
                .putInt(path.length).put(path).putInt(0);
        assertRefused(serializer, badPath.array(), "E", "a reply address that does not resolve");

        int firstResult = 1 + 8 + 8 + 1 + 4 + 4 + 4;
        byte[] badFlags = results.clone();
        badFlags[firstResult + 1] = (byte) 0x80;
        assertRefused(serializer, badFlags, "R", "result 0 has unknown flags 128");
        assertRefused(serializer, withInt(results, firstResult + 10, Ops.MAX_SCAN + 1), "R",
                (Ops.MAX_SCAN + 1) + " scan entries (at most " + Ops.MAX_SCAN + ")");
    }

    @Test
    void aBatchAboveTheLimitStillDecodesSoThePartitionCanRefuseItWithAnAnswer() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.Results> replies = testKit.<Ops.Results>createTestProbe().getRef();
        List<Ops.Op> ops = new ArrayList<>(Collections.nCopies(Ops.MAX_BATCH + 1, new Ops.Op(Ops.GET, 1, 0, 0)));
        Partition.Execute back = (Partition.Execute) serializer.fromBinary(serializer.toBinary(
                new Partition.Execute(1, 2, ops, replies)), "E");
        assertEquals(Ops.MAX_BATCH + 1, back.ops().size());
        assertNull(((Ops.Results) serializer.fromBinary(serializer.toBinary(new Ops.Results(List.of())), "R")).host());
    }

    @Test
    void aBundleAndAnAnswerBundleSurviveWithEveryBatchInOrder() throws Exception {
        BatchSerializer serializer = serializer();
        var serialization = SerializationExtension.get(Adapter.toClassic(testKit.system()));
        ActorRef<Ops.ResultsBundle> replies = testKit.<Ops.ResultsBundle>createTestProbe().getRef();
        PartitionRouter.Bundle bundle = new PartitionRouter.Bundle(List.of(
                new PartitionRouter.Routed(5, 7, 3, 6, List.of(new Ops.Op(Ops.GET, -5, 0, 0), new Ops.Op(Ops.PUT, 9, Long.MIN_VALUE, 0))),
                new PartitionRouter.Routed(1_023, 8, List.of()),
                new PartitionRouter.Routed(3, Long.MIN_VALUE, Long.MIN_VALUE, Long.MIN_VALUE, List.of(new Ops.Op(Ops.DELETE, 3, 0, 0)))), replies, -77);
        Ops.ResultsBundle answers = new Ops.ResultsBundle(List.of(
                new Ops.Results(7, List.of(Ops.Result.of(true, 4), Ops.Result.of(false, 0)), "pekko://dex@127.0.0.1:1", 3),
                new Ops.Results(8, List.of(Ops.Result.error(Ops.NOT_HELD, "moving")), null)));

        byte[] bundleBytes = serializer.toBinary(bundle);
        byte[] answerBytes = serializer.toBinary(answers);

        assertInstanceOf(BatchSerializer.class, serialization.findSerializerFor(bundle));
        assertInstanceOf(BatchSerializer.class, serialization.findSerializerFor(answers));
        assertEquals(1 + 4 + serializedPathLength(replies) + 8 + 4 + 3 * 37 + 3 * 25, bundleBytes.length, "37 bytes per batch, 25 per operation");
        assertEquals(bundle, serializer.fromBinary(bundleBytes, serializer.manifest(bundle)));
        assertEquals(answers, serializer.fromBinary(answerBytes, serializer.manifest(answers)));
        for (int cut = 0; cut < bundleBytes.length; cut++) {
            assertRefused(serializer, Arrays.copyOf(bundleBytes, cut), "B", "");
        }
        for (int cut = 0; cut < answerBytes.length; cut++) {
            assertRefused(serializer, Arrays.copyOf(answerBytes, cut), "S", "");
        }
        int batchesAt = 1 + 4 + serializedPathLength(replies) + 8;
        assertRefused(serializer, withInt(bundleBytes, batchesAt, 0), "B", "a Bundle of no batches");
        assertRefused(serializer, withInt(bundleBytes, batchesAt, WireLimits.MAX_BUNDLE + 1), "B",
                (WireLimits.MAX_BUNDLE + 1) + " batches (at most " + WireLimits.MAX_BUNDLE + ")");
        assertRefused(serializer, withInt(bundleBytes, 1, -1), "B", "a Bundle without a reply address");
        assertRefused(serializer, withInt(bundleBytes, batchesAt + 4 + 33, 100), "B", "100 operations announced");
        assertRefused(serializer, withInt(answerBytes, 1, 0), "S", "a ResultsBundle of no answers");
        assertRefused(serializer, withInt(answerBytes, 1 + 4, 1 << 20), "S", "answer 0 of 1048576 bytes");
        int firstLength = ByteBuffer.wrap(answerBytes).getInt(1 + 4);
        assertRefused(serializer, withInt(answerBytes, 1 + 4, firstLength + 1), "S", "");
        assertThrows(IllegalArgumentException.class, () -> serializer.toBinary(new PartitionRouter.Bundle(List.of(), replies)));
    }

    /**
     * Artery hands a ByteBufferSerializer its pooled envelope buffer: little-endian, direct, positioned after the
     * envelope's header. Each message is written there in the very bytes of the array path, read back from such a
     * buffer, and one too large for what remains fails before anything is written.
     */
    @Test
    void theEnvelopeBufferPathWritesAndReadsTheSameBytesAsTheArrayPath() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.Results> replies = testKit.<Ops.Results>createTestProbe().getRef();
        ActorRef<Ops.ResultsBundle> bundleReplies = testKit.<Ops.ResultsBundle>createTestProbe().getRef();
        // (untraced: a trace's encoder stamps the time it encodes)
        List<Object> messages = List.of(
                new Partition.Execute(42, 9, -3, 4, 17, 8, List.of(new Ops.Op(Ops.GET, -1, 0, 0),
                        new Ops.Op(Ops.PUT, new long[] {1, -2, 3}, 4, 0)), replies),
                new Ops.Results(5, List.of(Ops.Result.of(true, -99), Ops.Result.error(Ops.NOT_HELD, "moving"),
                        new Ops.Result(Ops.OK, true, 0, new long[] {1, 2}, new long[] {3, 4}, 5, null)), "pekko://dex@127.0.0.1:1", 6),
                new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(5, 7, 3, 6, List.of(new Ops.Op(Ops.GET, -5, 0, 0))),
                        new PartitionRouter.Routed(1_023, 8, List.of())), bundleReplies, -77),
                new Ops.ResultsBundle(List.of(new Ops.Results(7, List.of(Ops.Result.of(true, 4)), null, 3),
                        new Ops.Results(8, List.of(Ops.Result.error(Ops.FAILED, "x".repeat(300)),
                                new Ops.Result(Ops.OK, true, 0, new long[] {1, 2, 3, 4}, new long[] {5, 6}, 7, null, 2)), "h", 1))));
        for (Object message : messages) {
            String manifest = serializer.manifest(message);
            byte[] bytes = serializer.toBinary(message);
            ByteBuffer envelope = ByteBuffer.allocateDirect(bytes.length + 64).order(ByteOrder.LITTLE_ENDIAN);
            envelope.position(13);
            serializer.toBinary(message, envelope);
            assertEquals(13 + bytes.length, envelope.position(), manifest + ": the position moves past the message");
            byte[] written = new byte[bytes.length];
            envelope.get(13, written);
            assertArrayEquals(bytes, written, manifest + ": the same big-endian bytes in a little-endian buffer");
            assertEquals(ByteOrder.LITTLE_ENDIAN, envelope.order(), "the envelope's byte order is left as it was");

            ByteBuffer incoming = ByteBuffer.allocateDirect(bytes.length + 20).order(ByteOrder.LITTLE_ENDIAN);
            incoming.position(20);
            incoming.put(bytes).flip().position(20);
            Object back = serializer.fromBinary(incoming, manifest);
            assertEquals(incoming.limit(), incoming.position(), manifest + ": read to the end");
            Object fromArray = serializer.fromBinary(bytes, manifest);
            if (message instanceof Ops.Results || message instanceof Ops.ResultsBundle) { // arrays: compared by their bytes
                assertEquals(serializer.toBinary(fromArray).length, serializer.toBinary(back).length);
                assertArrayEquals(serializer.toBinary(fromArray), serializer.toBinary(back), manifest);
            } else {
                assertEquals(fromArray, back, manifest);
            }

            ByteBuffer small = ByteBuffer.allocateDirect(bytes.length - 1 + 5).order(ByteOrder.LITTLE_ENDIAN);
            while (small.hasRemaining()) {
                small.put((byte) 0x55);
            }
            small.position(5);
            assertThrows(java.nio.BufferOverflowException.class, () -> serializer.toBinary(message, small), manifest);
            assertEquals(5, small.position(), manifest + ": the position is left");
            for (int i = 0; i < small.capacity(); i++) {
                assertEquals((byte) 0x55, small.get(i), manifest + ": nothing written, byte " + i);
            }
            ByteBuffer longer = ByteBuffer.allocateDirect(bytes.length + 3).order(ByteOrder.LITTLE_ENDIAN);
            longer.put(bytes).put(new byte[3]).flip();
            assertThrows(java.io.NotSerializableException.class, () -> serializer.fromBinary(longer, manifest),
                    manifest + ": bytes after the message are refused");
            ByteBuffer truncated = ByteBuffer.wrap(Arrays.copyOf(bytes, bytes.length - 1)).order(ByteOrder.LITTLE_ENDIAN);
            assertThrows(java.io.NotSerializableException.class, () -> serializer.fromBinary(truncated, manifest), manifest);
        }
    }

    @Test
    void aBundleCarriesAtMostTheWiresOperationsInAll() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.ResultsBundle> replies = testKit.<Ops.ResultsBundle>createTestProbe().getRef();
        List<Ops.Op> half = Collections.nCopies(BatchSerializer.WIRE_MAX_OPS / 2 + 1, new Ops.Op(Ops.GET, 1, 0, 0));
        PartitionRouter.Bundle tooMany = new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(1, 1, half),
                new PartitionRouter.Routed(1, 2, half)), replies);

        assertThrows(IllegalArgumentException.class, () -> serializer.toBinary(tooMany));

        PartitionRouter.Bundle fits = new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(1, 1, half),
                new PartitionRouter.Routed(1, 2, half.subList(2, half.size()))), replies);
        byte[] bytes = serializer.toBinary(fits);
        assertEquals(fits, serializer.fromBinary(bytes, "B"));
        int secondCountAt = 1 + 4 + serializedPathLength(replies) + 8 + 4 + 37 + half.size() * 25 + 33;
        assertRefused(serializer, withInt(bytes, secondCountAt, half.size()), "B",
                half.size() + " operations (at most " + (BatchSerializer.WIRE_MAX_OPS - half.size()) + ")");
    }

    @Test
    void aTracedBatchAndItsAnswerCarryTheirStampsAndTheWireStampsItsOwn() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.ResultsBundle> replies = testKit.<Ops.ResultsBundle>createTestProbe().getRef();
        ActorRef<Ops.Results> answers = testKit.<Ops.Results>createTestProbe().getRef();
        long[] trace = HopTrace.create();
        trace[HopTrace.SUBMIT] = 11;
        trace[HopTrace.SENT] = 13;
        List<Ops.Op> ops = List.of(new Ops.Op(Ops.GET, 5, 0, 0));
        PartitionRouter.Bundle bundle = new PartitionRouter.Bundle(List.of(new PartitionRouter.Routed(5, 1, ops),
                new PartitionRouter.Routed(6, 2, 0, 0, ops, trace)), replies, 9);

        long before = System.nanoTime();
        byte[] bytes = serializer.toBinary(bundle);
        PartitionRouter.Bundle back = (PartitionRouter.Bundle) serializer.fromBinary(bytes, "B");
        long after = System.nanoTime();

        assertNull(back.batches().get(0).trace(), "an untraced batch stays untraced");
        long[] carried = back.batches().get(1).trace();
        assertEquals(11, carried[HopTrace.SUBMIT]);
        assertEquals(13, carried[HopTrace.SENT]);
        assertTrue(carried[HopTrace.ENCODED] >= before && carried[HopTrace.ENCODED] <= carried[HopTrace.DECODED]
                && carried[HopTrace.DECODED] <= after, "the encoder and the decoder stamp their own slots");
        assertEquals(0, carried[HopTrace.ROUTER], "nothing else is stamped on the way");

        Partition.Execute execute = new Partition.Execute(6, 3, 9, 2, 0, 0, ops, answers, carried.clone());
        long[] viaExecute = ((Partition.Execute) serializer.fromBinary(serializer.toBinary(execute), "E")).trace();
        assertEquals(11, viaExecute[HopTrace.SUBMIT]);
        Ops.Results results = new Ops.Results(3, List.of(Ops.Result.of(true, 4)), "host", 1, carried.clone());
        Ops.ResultsBundle answered = (Ops.ResultsBundle) serializer.fromBinary(serializer.toBinary(
                new Ops.ResultsBundle(List.of(results))), "S");
        long[] answerTrace = answered.answers().get(0).trace();
        assertEquals(13, answerTrace[HopTrace.SENT]);
        assertTrue(answerTrace[HopTrace.ANSWER_ENCODED] >= carried[HopTrace.DECODED]
                && answerTrace[HopTrace.ANSWER_DECODED] >= answerTrace[HopTrace.ANSWER_ENCODED], "the answer's wire stamps");

        byte[] badCount = bytes.clone();
        int traceAt = 1 + 4 + serializedPathLength(replies) + 8 + 4 + 37 + 25 + 32;
        assertEquals(HopTrace.STAMPS, badCount[traceAt], "the second batch's trace starts here");
        badCount[traceAt] = 3;
        assertRefused(serializer, badCount, "B", "a trace of 3 stamps (0 or " + HopTrace.STAMPS + ")");
        long[] wrongLength = new long[3];
        assertThrows(IllegalArgumentException.class, () -> serializer.toBinary(new PartitionRouter.Bundle(
                List.of(new PartitionRouter.Routed(6, 2, 0, 0, ops, wrongLength)), replies, 9)));
    }

    private int serializedPathLength(ActorRef<?> ref) {
        return org.apache.pekko.actor.typed.ActorRefResolver.get(testKit.system()).toSerializationFormat(ref)
                .getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
    }

    private static byte[] withInt(byte[] frame, int at, int value) {
        byte[] copy = frame.clone();
        ByteBuffer.wrap(copy).putInt(at, value);
        return copy;
    }

    private static void assertRefused(BatchSerializer serializer, byte[] frame, String manifest, String reason) {
        NotSerializableException e = assertThrows(NotSerializableException.class, () -> serializer.fromBinary(frame, manifest),
                () -> "a frame of " + frame.length + " bytes decoded");
        assertTrue(e.getMessage().startsWith("BatchSerializer: ") && e.getMessage().contains(reason), e.getMessage());
    }

    @Test
    void aBatchForAPartitionNoTableCanHaveIsRefused() throws Exception {
        BatchSerializer serializer = serializer();
        ActorRef<Ops.Results> replies = testKit.<Ops.Results>createTestProbe().getRef();
        for (long partition : new long[] {-1, dev.dex.core.partition.PartitionTable.MAX_PARTITIONS}) {
            byte[] bytes = serializer.toBinary(new Partition.Execute(partition, 2, List.of(new Ops.Op(Ops.GET, 1, 0, 0)), replies));
            java.io.NotSerializableException refused = org.junit.jupiter.api.Assertions.assertThrows(java.io.NotSerializableException.class,
                    () -> serializer.fromBinary(bytes, serializer.manifest(new Partition.Execute(0, List.of(), replies))));
            assertTrue(refused.getMessage().contains("partition " + partition), refused.getMessage());
        }
    }
}
