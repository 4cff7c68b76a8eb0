package dev.dex.actors.partition;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashSet;
import java.util.IntSummaryStatistics;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import scala.collection.immutable.IndexedSeq;
import scala.jdk.javaapi.CollectionConverters;
import scala.jdk.javaapi.FutureConverters;

import com.typesafe.config.ConfigFactory;

/**
 * A rebalance round starts only when every shard region answers: with a region whose actor is gone (a crashed
 * node's, as far as the coordinator can tell before the failure detector's verdict) nothing moves this round, not
 * its shards (the move would wait for the 60 s handoff-timeout) and not a live region's (the move would wait for
 * the dead node's removal); with all answering, Pekko's least-shard choice is kept.
 */
class ProbedRebalanceTest {
    private final ActorTestKit kit = ActorTestKit.create(ConfigFactory.parseString("""
            pekko.cluster.roles = [compute]
            pekko.cluster.sharding.handoff-timeout = 2s
            pekko.cluster.sharding.least-shard-allocation-strategy {
              rebalance-absolute-limit = 32
              rebalance-relative-limit = 0.5
            }
            """).withFallback(ActorTestKit.applicationTestConfig()));
    private ActorSystem system;

    @BeforeEach
    void up() throws Exception {
        Cluster cluster = Cluster.get(kit.system());
        cluster.manager().tell(Join.create(cluster.selfMember().address()));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (cluster.selfMember().status() != MemberStatus.up()) {
            assertTrue(System.nanoTime() < deadline, "the single-node cluster did not come up");
            Thread.sleep(20);
        }
        system = Adapter.toClassic(kit.system());
    }

    @AfterEach
    void close() {
        kit.shutdownTestKit();
    }

    /** A shard region stand-in: any actor answers Identify. */
    private ActorRef region(String name) {
        return Adapter.toClassic(kit.spawn(Behaviors.empty(), name));
    }

    private ActorRef deadRegion(String name) {
        var region = kit.spawn(Behaviors.empty(), name);
        kit.stop(region, Duration.ofSeconds(5));
        return Adapter.toClassic(region);
    }

    private static List<String> shards(int from, int to) {
        return IntStream.range(from, to).mapToObj(Integer::toString).collect(Collectors.toList());
    }

    private Set<String> rebalance(ProbedRebalance strategy, Map<ActorRef, List<String>> allocations) throws Exception {
        return new HashSet<>(CollectionConverters.asJava(
                FutureConverters.asJava(startRebalance(strategy, allocations)).toCompletableFuture().get(10, TimeUnit.SECONDS)));
    }

    private static scala.concurrent.Future<scala.collection.immutable.Set<String>> startRebalance(ProbedRebalance strategy,
                                                                                           Map<ActorRef, List<String>> allocations) {
        Map<ActorRef, IndexedSeq<String>> converted = new LinkedHashMap<>();
        allocations.forEach((region, shards) -> converted.put(region, CollectionConverters.asScala(shards).toIndexedSeq()));
        scala.collection.immutable.Map<ActorRef, IndexedSeq<String>> current =
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(converted));
        return strategy.rebalance(current, scala.collection.immutable.Set$.MODULE$.<String>empty());
    }

    /** The address of a node that is not there: this system's name at a closed loopback port. */
    private org.apache.pekko.actor.Address nobody() throws Exception {
        int closed = dev.dex.rdma.testing.LoopbackPorts.free();
        org.apache.pekko.actor.Address self = Cluster.get(kit.system()).selfMember().address();
        return new org.apache.pekko.actor.Address(self.protocol(), self.system(), "127.0.0.1", closed);
    }

    /** A shard region on a node that is not there: it never answers, as a crashed one. */
    private ActorRef silentRegion() throws Exception {
        return ((org.apache.pekko.actor.ExtendedActorSystem) system).provider().resolveActorRef(
                nobody() + "/system/sharding/dex-partition");
    }

    private ProbedRebalance started(Duration timeout) {
        ProbedRebalance strategy = new ProbedRebalance(timeout, "/system/no-coordinator-here");
        strategy.start(system);
        return strategy;
    }

    @Test
    void aRegionThatDoesNotAnswerPostponesTheRound() throws Exception {
        ActorRef live = region("live");
        ActorRef dead = deadRegion("dead");
        ActorRef joined = region("joined");
        List<String> liveShards = shards(0, 10);
        List<String> deadShards = shards(10, 20);
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(live, liveShards);
        allocations.put(dead, deadShards);
        allocations.put(joined, List.of());

        ProbedRebalance strategy = started(Duration.ofMillis(500));

        assertEquals(Set.of(), rebalance(strategy, allocations), "neither the dead region's shards nor the live one's move");
        // The dead region removed, its shards allocated to the live one (a round counts shards without a home where the
        // allocation will put them, so they must be somewhere): the live region's surplus moves.
        allocations.remove(dead);
        assertEquals(Set.of(), rebalance(strategy, allocations), "the dead region's 10 shards, without a home, will go to"
                + " the empty region when asked for: nothing needs to move");
        allocations.put(live, shards(0, 20));
        Set<String> moved = rebalance(strategy, allocations);
        assertFalse(moved.isEmpty(), "the live region's surplus moves to the new one");
        assertTrue(shards(0, 20).containsAll(moved), "only the live region's shards move: " + moved);
    }

    @Test
    void withEveryRegionAnsweringTheLeastShardChoiceIsKept() throws Exception {
        ActorRef first = region("first");
        ActorRef second = region("second");
        ActorRef joined = region("joined");
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(first, shards(0, 10));
        allocations.put(second, shards(10, 20));
        allocations.put(joined, List.of());

        Set<String> moved = rebalance(started(Duration.ofMillis(500)), allocations);

        // 20 shards on 3 regions: each of the two loaded regions gives up 3 (Pekko's least-shard strategy).
        assertEquals(6, moved.size(), "moved: " + moved);
        assertTrue(moved.stream().anyMatch(shards(0, 10)::contains) && moved.stream().anyMatch(shards(10, 20)::contains),
                "both loaded regions give shards up: " + moved);
    }

    @Test
    void aRegionThatNeverAnswersPostponesTheRoundAndNoSecondRoundStartsMeanwhile() throws Exception {
        ActorRef live = region("live-beside-silent");
        ActorRef silent = silentRegion();
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(live, shards(0, 10));
        allocations.put(silent, shards(10, 20));
        allocations.put(region("joined-beside-silent"), List.of());
        ProbedRebalance strategy = started(Duration.ofMillis(700));

        var first = startRebalance(strategy, allocations);
        var second = startRebalance(strategy, allocations);
        assertEquals(Set.of(), new HashSet<>(CollectionConverters.asJava(
                FutureConverters.asJava(second).toCompletableFuture().get(10, TimeUnit.SECONDS))),
                "a tick while a round's probes are out proposes nothing");
        assertFalse(first.isCompleted(), "the second round did not wait for the first one's probes");
        assertEquals(Set.of(), new HashSet<>(CollectionConverters.asJava(
                FutureConverters.asJava(first).toCompletableFuture().get(10, TimeUnit.SECONDS))), "the silent region postpones it");
        // With the probes in, rounds start again: without the silent region (its shards now on the live one), the live
        // region's surplus moves.
        allocations.remove(silent);
        allocations.put(live, shards(0, 20));
        assertFalse(rebalance(strategy, allocations).isEmpty(), "a round after the postponed one moves shards");
    }

    @Test
    void aStoppedRegionThatGivesNothingUpStillPostponesTheRound() throws Exception {
        ActorRef loaded = region("loaded");
        ActorRef dead = deadRegion("dead-empty");
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(loaded, shards(0, 10));
        allocations.put(dead, List.of());

        assertEquals(Set.of(), rebalance(started(Duration.ofMillis(300)), allocations),
                "a move to or past a dead region would wait for its removal");
    }

    @Test
    void aNodeThatIsNotThereDoesNotAnswerWhileThisOneDoes() throws Exception {
        ProbedRebalance strategy = started(Duration.ofMillis(500));
        org.apache.pekko.actor.Address self = Cluster.get(kit.system()).selfMember().address();
        assertTrue(strategy.answers(self).get(5, TimeUnit.SECONDS), "this node answers");
        org.apache.pekko.actor.Address nobody = nobody();
        assertFalse(strategy.answers(nobody).get(5, TimeUnit.SECONDS), "no node listens at " + nobody);
    }

    /** A region of a node at {@code port} that is not there; never asked anything here (the probe is off). */
    private ActorRef regionAt(int port) {
        return ((org.apache.pekko.actor.ExtendedActorSystem) system).provider().resolveActorRef(
                addressAt(port) + "/system/sharding/dex-partition");
    }

    private org.apache.pekko.actor.Address addressAt(int port) {
        org.apache.pekko.actor.Address self = Cluster.get(kit.system()).selfMember().address();
        return new org.apache.pekko.actor.Address(self.protocol(), self.system(), "127.0.0.1", port);
    }

    private Set<String> rebalance(ProbedRebalance strategy, Map<ActorRef, List<String>> allocations, Set<String> inProgress)
            throws Exception {
        Map<ActorRef, IndexedSeq<String>> converted = new LinkedHashMap<>();
        allocations.forEach((region, shards) -> converted.put(region, CollectionConverters.asScala(shards).toIndexedSeq()));
        var future = strategy.rebalance(scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(converted)),
                scala.collection.immutable.Set$.MODULE$.from(CollectionConverters.asScala(inProgress)));
        return new HashSet<>(CollectionConverters.asJava(FutureConverters.asJava(future).toCompletableFuture().get(10, TimeUnit.SECONDS)));
    }

    @Test
    void whileANodeDrainsEachRoundMovesAGroupOfItsPartitionsLessThoseStillMovingAndNothingElse() throws Exception {
        ActorRef leaving = regionAt(1);
        ActorRef loaded = regionAt(2);
        ActorRef joined = regionAt(3);
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(leaving, shards(0, 8));
        allocations.put(loaded, shards(8, 20));
        allocations.put(joined, List.of());
        Set<org.apache.pekko.actor.Address> draining = new java.util.concurrent.CopyOnWriteArraySet<>();
        // The round's limit is 8 here (the minimum): the group of 3 decides.
        ProbedRebalance strategy = new ProbedRebalance(Duration.ZERO, "/system/no-coordinator-here", 3, () -> Set.copyOf(draining));
        strategy.start(system);

        draining.add(addressAt(1));
        Set<String> moved = rebalance(strategy, allocations, Set.of());
        assertEquals(3, moved.size(), "a group of three: " + moved);
        assertTrue(shards(0, 8).containsAll(moved), "only the draining node's partitions move: " + moved);
        moved = rebalance(strategy, allocations, Set.of("0", "1"));
        assertEquals(1, moved.size(), "two of the group are still moving: " + moved);
        assertFalse(moved.contains("0") || moved.contains("1"), "not a partition already moving: " + moved);
        assertEquals(Set.of(), rebalance(strategy, allocations, Set.of("0", "1", "9")), "three are moving: the group is full");

        // With every region draining there is nowhere to move to: nothing moves.
        draining.add(addressAt(2));
        draining.add(addressAt(3));
        assertEquals(Set.of(), rebalance(strategy, allocations, Set.of()), "every node drains");
    }

    @Test
    void withAHandoffGroupOfZeroADrainingNodesPartitionsAreLeftToItsRegionsShutdown() throws Exception {
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(regionAt(1), shards(0, 8));
        allocations.put(regionAt(2), List.of());
        ProbedRebalance strategy = new ProbedRebalance(Duration.ZERO, "/system/no-coordinator-here", 0,
                () -> Set.of(addressAt(1)));
        strategy.start(system);
        assertEquals(Set.of(), rebalance(strategy, allocations, Set.of()));
        assertThrows(IllegalArgumentException.class, () -> new ProbedRebalance(Duration.ZERO, "/system/x", -1));
    }

    /**
     * {@link ProbedRebalance#balance} on 300 random maps (2-40 regions, 0-1,100 partitions, dealt unevenly): without a
     * limit, the partitions it picks, placed one by one on the region with fewest (as the allocation places them),
     * leave every region within one of the others in one pass, with no partition picked twice or picked where it is
     * not; with a limit, it picks no more than that, from every region that must give (round-robin).
     */
    @Test
    void balanceReachesABalancedMapInOnePassAndTakesFromEveryGiverUnderALimit() {
        java.util.SplittableRandom random = new java.util.SplittableRandom(32);
        List<ActorRef> regions = IntStream.range(0, 40).mapToObj(r -> regionAt(10_000 + r)).toList();
        for (int run = 0; run < 300; run++) {
            int n = random.nextInt(2, 41);
            int shards = random.nextInt(0, 1_101);
            Map<ActorRef, List<String>> map = new LinkedHashMap<>();
            regions.subList(0, n).forEach(region -> map.put(region, new java.util.ArrayList<>()));
            double[] weights = random.doubles(n, 0, 1).map(w -> w * w * w).toArray();
            double sum = java.util.Arrays.stream(weights).sum();
            for (int s = 0; s < shards; s++) {
                double pick = random.nextDouble() * sum;
                int r = 0;
                while (r < n - 1 && (pick -= weights[r]) > 0) {
                    r++;
                }
                map.get(regions.get(r)).add(Integer.toString(s));
            }
            Map<ActorRef, IndexedSeq<String>> converted = new LinkedHashMap<>();
            map.forEach((region, held) -> converted.put(region, CollectionConverters.asScala(held).toIndexedSeq()));

            int limit = random.nextInt(1, 40);
            List<String> limited = ProbedRebalance.balance(converted, limit);
            List<String> all = ProbedRebalance.balance(converted, Integer.MAX_VALUE);
            assertTrue(limited.size() == Math.min(limit, all.size()), "a limit of " + limit + ": " + limited.size() + " of " + all.size());
            long giversInAll = map.values().stream().filter(held -> held.stream().anyMatch(all::contains)).count();
            long giversLimited = map.values().stream().filter(held -> held.stream().anyMatch(limited::contains)).count();
            assertEquals(Math.min(giversInAll, limited.size()), giversLimited, "round-robin over the givers");

            assertEquals(all.size(), new HashSet<>(all).size(), "no partition picked twice");
            for (String shard : all) {
                map.values().stream().filter(held -> held.remove(shard)).findFirst()
                        .orElseThrow(() -> new AssertionError("picked " + shard + ", held nowhere"));
            }
            for (String shard : all) {
                map.values().stream().min(java.util.Comparator.comparingInt(List::size)).orElseThrow().add(shard);
            }
            IntSummaryStatistics sizes = map.values().stream().mapToInt(List::size).summaryStatistics();
            assertTrue(sizes.getMax() - sizes.getMin() <= 1, "balanced in one pass: " + sizes + " after moving " + all.size());
            assertEquals(shards, sizes.getSum());
        }
    }

    /**
     * Partitions handed off by one round and not yet asked for again are in no region: {@code balance} counts them where
     * the allocation will put them (on the region with fewest). A join of a 17th region to 16 of 64, rounds of 16, none
     * of the moved partitions asked for until the rounds stop: 60 move in 4 rounds, the new region's share, and the map
     * is balanced once they are at home. Counted nowhere, the same rounds take from the old regions again and again.
     */
    @Test
    void balanceCountsThePartitionsWithoutAHomeWhereTheyWillGo() {
        for (boolean counted : new boolean[] {true, false}) {
            Map<ActorRef, List<String>> map = new LinkedHashMap<>();
            for (int r = 0; r < 16; r++) {
                map.put(regionAt(20_000 + r), new java.util.ArrayList<>(shards(r * 64, r * 64 + 64)));
            }
            map.put(regionAt(20_016), new java.util.ArrayList<>());
            List<String> homeless = new java.util.ArrayList<>();
            int rounds = 0;
            while (rounds < 50) {
                Map<ActorRef, IndexedSeq<String>> converted = new LinkedHashMap<>();
                map.forEach((region, held) -> converted.put(region, CollectionConverters.asScala(held).toIndexedSeq()));
                List<String> chosen = counted ? ProbedRebalance.balance(converted, 16, homeless.size())
                        : ProbedRebalance.balance(converted, 16);
                if (chosen.isEmpty()) {
                    break;
                }
                rounds++;
                for (String shard : chosen) {
                    assertTrue(map.values().stream().anyMatch(held -> held.remove(shard)), "picked " + shard + ", held nowhere");
                }
                homeless.addAll(chosen);
            }
            if (!counted) {
                assertTrue(homeless.size() > 120, "uncounted, the old regions give again and again: " + homeless.size());
                continue;
            }
            assertEquals(60, homeless.size(), "the new region's share moves, no more");
            assertEquals(4, rounds);
            for (String shard : homeless) {
                map.values().stream().min(java.util.Comparator.comparingInt(List::size)).orElseThrow().add(shard);
            }
            IntSummaryStatistics sizes = map.values().stream().mapToInt(List::size).summaryStatistics();
            assertTrue(sizes.getMax() - sizes.getMin() <= 1 && sizes.getSum() == 1024, "balanced once at home: " + sizes);
        }
    }

    /**
     * A round balances only among regions whose member is Up: a region of a node that is not a member that is Up (here
     * not a member at all; a leaving node's region alike, which the coordinator allocates nothing to) gets nothing moved
     * towards it, which would only move partitions off a live node and back.
     */
    @Test
    void aRoundMovesNothingTowardsARegionWhoseMemberIsNotUp() throws Exception {
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(region("up-and-full"), shards(0, 10));
        allocations.put(regionAt(10_999), List.of());
        assertEquals(Set.of(), rebalance(started(Duration.ZERO), allocations), "nothing towards a region not Up");
        allocations.put(region("up-and-empty"), List.of());
        assertEquals(5, rebalance(started(Duration.ZERO), allocations).size(), "half of them towards the one that is Up");
    }

    @Test
    void aProbeTimeoutMustNotBeNegative() {
        assertThrows(IllegalArgumentException.class, () -> new ProbedRebalance(Duration.ofMillis(-1), "/system/x"));
    }

    @Test
    void withTheProbeOffADeadRegionDoesNotPostponeTheRound() throws Exception {
        Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
        allocations.put(region("live-unprobed"), shards(0, 10));
        allocations.put(deadRegion("dead-unprobed"), shards(10, 20));
        allocations.put(region("joined-unprobed"), List.of());
        assertEquals(6, rebalance(started(Duration.ZERO), allocations).size(), "Pekko's choice, unprobed");
    }

    @Test
    void aRegionGoneFromTheCoordinatorsStateWithItsNodeIsToldToTheCoordinatorAsStoppedAtEachRoundForAHandoffTimeout()
            throws Exception {
        var coordinator = kit.<Object>createTestProbe();
        ProbedRebalance strategy = new ProbedRebalance(Duration.ZERO,
                Adapter.toClassic(coordinator.ref()).path().toStringWithoutAddress());
        strategy.start(system);
        ActorRef staying = region("staying");
        ActorRef gone = silentRegion(); // of a node that is not a member
        ActorRef ownGone = region("own-gone"); // of this node, which is a member
        // Of a second node: a member that is up, then down.
        org.apache.pekko.actor.typed.ActorSystem<Void> other = org.apache.pekko.actor.typed.ActorSystem.create(
                Behaviors.empty(), kit.system().name(), kit.system().settings().config());
        try {
            Cluster.get(other).manager().tell(Join.create(Cluster.get(kit.system()).selfMember().address()));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!Cluster.get(other).selfMember().status().equals(MemberStatus.up())) {
                assertTrue(System.nanoTime() < deadline, "the second node did not come up");
                Thread.sleep(50);
            }
            ActorRef othersGone = ((org.apache.pekko.actor.ExtendedActorSystem) system).provider().resolveActorRef(
                    Cluster.get(other).selfMember().address() + "/system/sharding/dex-partition");
            Map<ActorRef, List<String>> allocations = new LinkedHashMap<>();
            allocations.put(staying, shards(0, 4));
            allocations.put(gone, shards(4, 8));
            allocations.put(ownGone, shards(8, 10));
            allocations.put(othersGone, shards(10, 12));
            rebalance(strategy, allocations);
            // An allocation gets the regions without those shutting down or in their removal margin: no departure.
            allocate(strategy, Map.of(staying, shards(0, 4)));
            coordinator.expectNoMessage(Duration.ofMillis(300));

            allocations.remove(gone);
            allocations.remove(ownGone);
            rebalance(strategy, allocations);
            var told = new org.apache.pekko.cluster.sharding.ShardCoordinator$Internal$RegionStopped(gone);
            assertEquals(told, coordinator.receiveMessage(Duration.ofSeconds(5)));
            coordinator.expectNoMessage(Duration.ofMillis(300)); // not this node's own region
            // Again at the next round: a worker may hand off to the dead region only after other regions' acknowledgements.
            rebalance(strategy, allocations);
            assertEquals(told, coordinator.receiveMessage(Duration.ofSeconds(5)));
            // Not after the handoff timeout (2 s here).
            Thread.sleep(2_100);
            rebalance(strategy, allocations);
            coordinator.expectNoMessage(Duration.ofMillis(300));

            // The region of a member that is up is gone from the state (it stopped, say): not told while the member is up.
            allocations.remove(othersGone);
            rebalance(strategy, allocations);
            coordinator.expectNoMessage(Duration.ofMillis(300));
            // Once the member is down, it is.
            Cluster.get(kit.system()).manager().tell(new org.apache.pekko.cluster.typed.Down(Cluster.get(other).selfMember().address()));
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (Cluster.get(kit.system()).state().members().exists(m -> m.address().equals(othersGone.path().address())
                    && !m.status().equals(MemberStatus.down()))) {
                assertTrue(System.nanoTime() < deadline, "the second node was not downed");
                Thread.sleep(50);
            }
            rebalance(strategy, allocations);
            assertEquals(new org.apache.pekko.cluster.sharding.ShardCoordinator$Internal$RegionStopped(othersGone),
                    coordinator.receiveMessage(Duration.ofSeconds(5)));
        } finally {
            other.terminate();
            other.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
    }

    private static void allocate(ProbedRebalance strategy, Map<ActorRef, List<String>> allocations) throws Exception {
        Map<ActorRef, IndexedSeq<String>> converted = new LinkedHashMap<>();
        allocations.forEach((region, shards) -> converted.put(region, CollectionConverters.asScala(shards).toIndexedSeq()));
        FutureConverters.asJava(strategy.allocateShard(ActorRef.noSender(), "99",
                scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(converted))))
                .toCompletableFuture().get(10, TimeUnit.SECONDS);
    }

    @Test
    void theCoordinatorPathNamesTheCoordinatorThatShardingStarts() throws Exception {
        var key = org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey.create(String.class, "probed type/1");
        org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding.get(kit.system()).init(
                org.apache.pekko.cluster.sharding.typed.javadsl.Entity.of(key, entity -> Behaviors.<String>empty()).withRole("compute"));
        String path = ProbedRebalance.coordinatorPath(kit.system(), key.name());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        boolean found = false;
        while (!found && System.nanoTime() < deadline) {
            var identity = (org.apache.pekko.actor.ActorIdentity) FutureConverters.asJava(org.apache.pekko.pattern.Patterns.ask(
                    system.actorSelection(path), new org.apache.pekko.actor.Identify("coordinator?"), 2_000))
                    .toCompletableFuture().get(5, TimeUnit.SECONDS);
            found = identity.getActorRef().isPresent();
            if (!found) {
                Thread.sleep(100);
            }
        }
        assertTrue(found, "no coordinator at " + path);
    }
}
