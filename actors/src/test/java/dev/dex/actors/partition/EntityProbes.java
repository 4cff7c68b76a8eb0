package dev.dex.actors.partition;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;

/** Talking to a {@link Partition} entity directly, as sharding would, and holding its workers still. */
public final class EntityProbes {
    public static final Duration REPLY = Duration.ofSeconds(10);

    private final ActorTestKit testKit;

    /** A test kit whose system is local (no cluster): entities are spawned and spoken to directly. */
    public static ActorTestKit localTestKit() {
        return new org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder()
                .withCustomConfig(com.typesafe.config.ConfigFactory.parseString("""
                        pekko.actor.provider = local
                        # a dispatcher of one thread, for tests that must hold an actor back while its mail piles up
                        dex-test-one-thread {
                          type = Dispatcher
                          executor = thread-pool-executor
                          thread-pool-executor.fixed-pool-size = 1
                        }
                        """)
                        .withFallback(ActorTestKit.applicationTestConfig()))
                .build();
    }

    EntityProbes(ActorTestKit testKit) {
        this.testKit = testKit;
    }

    public static Ops.Op get(long key) {
        return new Ops.Op(Ops.GET, key, 0, 0);
    }

    public static Ops.Op put(long key, long value) {
        return new Ops.Op(Ops.PUT, key, value, 0);
    }

    public static Ops.Op delete(long key) {
        return new Ops.Op(Ops.DELETE, key, 0, 0);
    }

    public static Ops.Op scan(long start, int count) {
        return new Ops.Op(Ops.SCAN, start, 0, count);
    }

    /**
     * The partition id a batch sent straight to an entity names: only sharding reads it ({@link Partition.IdExtractor}),
     * and the entity a test spawned is reached without sharding. In range, since the wire format refuses ids no table has.
     */
    public static final long DIRECT = 0;

    /** Sends a batch and returns the probe its results will come to. */
    public TestProbe<Ops.Results> send(ActorRef<Partition.Command> entity, List<Ops.Op> ops) {
        TestProbe<Ops.Results> probe = testKit.createTestProbe();
        entity.tell(new Partition.Execute(DIRECT, ops, probe.getRef()));
        return probe;
    }

    /** Sends a batch and waits for its results. */
    public List<Ops.Result> execute(ActorRef<Partition.Command> entity, List<Ops.Op> ops) {
        return send(entity, ops).receiveMessage(REPLY).results();
    }

    /**
     * Occupies a worker until the returned latch is counted down. With one worker thread, every task
     * submitted meanwhile (acquire, a batch, release) waits behind it, in order: the entity's state can
     * then be set up message by message.
     */
    public static CountDownLatch occupy(EngineWorkers workers) {
        CountDownLatch gate = new CountDownLatch(1);
        workers.submit(() -> {
            try {
                return gate.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        });
        return gate;
    }
}
